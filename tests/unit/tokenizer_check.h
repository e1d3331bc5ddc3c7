/* tokenizer_check.h - the streamed-decode property shared by test_tokenizer.c and
 * tokenizer_driver.c: for every prefix ids[0..k) (k = 0..n) a fresh sc_detok, fed the
 * prefix one id at a time and finished, gives exactly sc_tokenizer_decode of the prefix,
 * and every push appends whole UTF-8 characters. O(n^2) pushes: for test-sized lists. */
#ifndef SC_TOKENIZER_CHECK_H
#define SC_TOKENIZER_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/tokenizer.h"

/* 0 when the property holds, else -1 with the first difference described in why. */
int tok_stream_check(const sc_tokenizer *t, const int32_t *ids, size_t n, bool skip_special,
                     char *why, size_t cap);

#endif
