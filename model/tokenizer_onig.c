/* tokenizer_onig.c - Oniguruma pattern syntax (what HF compiles Split and Replace
 * patterns with) translated into PCRE2 syntax: what tokenizer.h lists is rewritten to
 * mean what Oniguruma means, the rest is refused with the pattern named. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/tokenizer_int.h"

static int put_str(sc_tok_text *b, const char *s) { return tk_text_put(b, s, strlen(s)); }

/* The sets that differ between the engines, spelled as PCRE2 class contents. */
#define SET_SPACE "\\t-\\r\\x{85}\\p{Z}"          /* Unicode White_Space */
/* Oniguruma's Unicode \w: Alphabetic, marks, decimal digits, connectors; outside a class
 * also the Latin-1 digits and fractions (² ³ ¹ ¼ ½ ¾) that its ISO-8859-1 table marks as
 * word characters (inside a class it does not look at that table). */
#define SET_WORD "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}"
#define SET_WORD_L1 SET_WORD "\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}"
#define SET_DIGIT "\\p{Nd}"
#define SET_HEX "0-9A-Fa-f"                        /* Oniguruma's \h */

typedef struct tr {
  const uint8_t *s;
  size_t n, i;
  sc_tok_text out;
  const char *src; /* for messages */
  size_t srclen;
  sc_diag *d;
  int depth;
  bool icase[128];     /* case-insensitive, per group depth */
  int prev_letter;     /* the previous atom, when it was an ASCII letter literal, or -1 */
  int err;
} tr;

static int refuse(tr *t, const char *what) {
  if (t->err) return t->err;
  t->err = sc_fail(t->d, SC_ENOTSUP,
                   "regex \"%.*s\": %s (at byte %zu) has no PCRE2 translation here; "
                   "the tokenizer refuses the pattern rather than split differently from HF",
                   (int)(t->srclen > 120 ? 120 : t->srclen), t->src, what, t->i);
  return t->err;
}

static int emit(tr *t, const char *s) {
  if (!t->err && put_str(&t->out, s) != 0) t->err = SC_ENOMEM;
  return t->err;
}

static int emit_cp(tr *t, uint32_t cp) {
  char b[16];
  if ((cp >= '0' && cp <= '9') || (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z')) {
    b[0] = (char)cp;
    b[1] = '\0';
  } else {
    snprintf(b, sizeof b, "\\x{%X}", (unsigned)cp);
  }
  return emit(t, b);
}

/* The next code point of the pattern (the pattern is valid UTF-8: it came from JSON). */
static uint32_t next_cp(tr *t) {
  const size_t l = tk_utf8_len(t->s + t->i, t->n - t->i);
  if (l == 0) {
    t->i++;
    return 0xFFFD;
  }
  const uint32_t cp = tk_utf8_get(t->s + t->i, l);
  t->i += l;
  return cp;
}

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* One escape, parsed: a code point, or a set (class contents) that may be negated. */
typedef struct atom {
  bool is_set;
  uint32_t cp;
  char set[96];
  bool neg;
} atom;

/* Property names Oniguruma accepts that PCRE2 spells the same way, with the same
 * meaning: general categories and the common scripts (as Script, hence "sc:"). */
static const char *const GC[] = {
    "L", "Lu", "Ll", "Lt", "Lm", "Lo", "M", "Mn", "Mc", "Me", "N", "Nd", "Nl", "No",
    "P", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "S", "Sm", "Sc", "Sk", "So",
    "Z", "Zs", "Zl", "Zp", "C", "Cc", "Cf", "Cs", "Co", "Cn"};
static const struct {
  const char *name, *gc;
} GC_LONG[] = {
    {"letter", "L"}, {"uppercaseletter", "Lu"}, {"lowercaseletter", "Ll"},
    {"titlecaseletter", "Lt"}, {"modifierletter", "Lm"}, {"otherletter", "Lo"},
    {"mark", "M"}, {"nonspacingmark", "Mn"}, {"spacingmark", "Mc"}, {"enclosingmark", "Me"},
    {"number", "N"}, {"decimalnumber", "Nd"}, {"letternumber", "Nl"}, {"othernumber", "No"},
    {"punctuation", "P"}, {"connectorpunctuation", "Pc"}, {"dashpunctuation", "Pd"},
    {"openpunctuation", "Ps"}, {"closepunctuation", "Pe"}, {"initialpunctuation", "Pi"},
    {"finalpunctuation", "Pf"}, {"otherpunctuation", "Po"}, {"symbol", "S"},
    {"mathsymbol", "Sm"}, {"currencysymbol", "Sc"}, {"modifiersymbol", "Sk"},
    {"othersymbol", "So"}, {"separator", "Z"}, {"spaceseparator", "Zs"},
    {"lineseparator", "Zl"}, {"paragraphseparator", "Zp"}, {"other", "C"},
    {"control", "Cc"}, {"format", "Cf"}, {"surrogate", "Cs"}, {"privateuse", "Co"},
    {"unassigned", "Cn"}};
static const char *const SCRIPTS[] = {
    "Han", "Hiragana", "Katakana", "Hangul", "Latin", "Cyrillic", "Greek", "Arabic",
    "Hebrew", "Thai", "Devanagari", "Armenian", "Georgian", "Bengali", "Tamil", "Common",
    "Inherited"};

/* Oniguruma's loose matching of property names: case, spaces, '_' and '-' ignored. */
static void loose(const char *in, size_t n, char *out, size_t cap) {
  size_t k = 0;
  for (size_t i = 0; i < n && k + 1 < cap; i++) {
    const char c = in[i];
    if (c == ' ' || c == '_' || c == '-') continue;
    out[k++] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  out[k] = '\0';
}

static int property(tr *t, bool neg, atom *a) {
  if (t->i >= t->n || t->s[t->i] != '{') return refuse(t, "\\p without {name}");
  t->i++;
  if (t->i < t->n && t->s[t->i] == '^') {
    neg = !neg;
    t->i++;
  }
  const size_t b = t->i;
  while (t->i < t->n && t->s[t->i] != '}') t->i++;
  if (t->i >= t->n) return refuse(t, "an unterminated \\p{");
  const char *name = (const char *)t->s + b;
  const size_t len = t->i - b;
  t->i++;
  char key[64];
  loose(name, len, key, sizeof key);
  const char *pc = NULL;
  bool script = false;
  for (size_t k = 0; k < sizeof GC / sizeof GC[0] && !pc; k++) {
    char g[8];
    loose(GC[k], strlen(GC[k]), g, sizeof g);
    if (strcmp(g, key) == 0) pc = GC[k];
  }
  for (size_t k = 0; k < sizeof GC_LONG / sizeof GC_LONG[0] && !pc; k++)
    if (strcmp(GC_LONG[k].name, key) == 0) pc = GC_LONG[k].gc;
  for (size_t k = 0; k < sizeof SCRIPTS / sizeof SCRIPTS[0] && !pc; k++) {
    char g[32];
    loose(SCRIPTS[k], strlen(SCRIPTS[k]), g, sizeof g);
    if (strcmp(g, key) == 0) {
      pc = SCRIPTS[k];
      script = true;
    }
  }
  if (pc == NULL) return refuse(t, "a Unicode property this translation does not know");
  if (t->icase[t->depth]) return refuse(t, "a property under (?i)");
  a->is_set = true;
  a->neg = false; /* \P{..} is a plain class item in PCRE2 */
  snprintf(a->set, sizeof a->set, "\\%c{%s%s}", neg ? 'P' : 'p', script ? "sc:" : "", pc);
  return 0;
}

/* Parses the escape after a backslash (t->i is past the backslash). */
static int escape(tr *t, bool in_class, atom *a) {
  *a = (atom){0};
  if (t->i >= t->n) return refuse(t, "a trailing backslash");
  const uint8_t c = t->s[t->i];
  if (c >= 0x80) {
    a->cp = next_cp(t);
    return 0;
  }
  t->i++;
  const char *set = NULL;
  bool neg = false;
  switch (c) {
    case 't': a->cp = '\t'; return 0;
    case 'n': a->cp = '\n'; return 0;
    case 'r': a->cp = '\r'; return 0;
    case 'f': a->cp = '\f'; return 0;
    case 'v': a->cp = 0x0B; return 0;
    case 'a': a->cp = 0x07; return 0;
    case 'e': a->cp = 0x1B; return 0;
    case 's': set = SET_SPACE; break;
    case 'S': set = SET_SPACE; neg = true; break;
    case 'w': set = in_class ? SET_WORD : SET_WORD_L1; break;
    case 'W': set = in_class ? SET_WORD : SET_WORD_L1; neg = true; break;
    case 'd': set = "\\p{Nd}"; break;
    case 'D': set = "\\P{Nd}"; break;
    case 'h': set = SET_HEX; break;
    case 'H': set = SET_HEX; neg = true; break;
    case 'p': return property(t, false, a);
    case 'P': return property(t, true, a);
    case 'x': {
      uint32_t v = 0;
      if (t->i < t->n && t->s[t->i] == '{') {
        size_t k = t->i + 1, digits = 0;
        for (; k < t->n && hexval(t->s[k]) >= 0 && digits < 8; k++, digits++)
          v = v * 16 + (uint32_t)hexval(t->s[k]);
        if (digits == 0 || k >= t->n || t->s[k] != '}' || v > 0x10FFFF ||
            (v >= 0xD800 && v < 0xE000))
          return refuse(t, "a malformed \\x{...}");
        t->i = k + 1;
      } else {
        size_t digits = 0;
        while (t->i < t->n && digits < 2 && hexval(t->s[t->i]) >= 0)
          v = v * 16 + (uint32_t)hexval(t->s[t->i++]), digits++;
        if (digits == 0) return refuse(t, "a \\x without hex digits");
        if (v >= 0x80) return refuse(t, "\\xHH above 7F (a raw byte in Oniguruma)");
      }
      a->cp = v;
      return 0;
    }
    case 'u': {
      uint32_t v = 0;
      for (int k = 0; k < 4; k++) {
        if (t->i >= t->n || hexval(t->s[t->i]) < 0) return refuse(t, "a malformed \\uHHHH");
        v = v * 16 + (uint32_t)hexval(t->s[t->i++]);
      }
      if (v >= 0xD800 && v < 0xE000) return refuse(t, "a surrogate \\uHHHH");
      a->cp = v;
      return 0;
    }
    case 'A':
    case 'z':
    case 'Z':
      if (in_class) return refuse(t, "an anchor inside a class");
      a->is_set = true; /* emitted verbatim, below */
      a->set[0] = '\\';
      a->set[1] = (char)c;
      a->neg = true;  /* marks "verbatim" for the caller */
      a->cp = 0xFFFFFFFF;
      return 0;
    default:
      if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
        return refuse(t, "this escape (\\b \\B \\G \\K \\R \\X \\Q, back-references, octal "
                         "and control escapes are not translated)");
      a->cp = c; /* an escaped punctuation character is itself */
      return 0;
  }
  if (t->icase[t->depth] && c != 's' && c != 'S' && c != 'd' && c != 'D')
    return refuse(t, "\\w \\W \\h \\H under (?i)");
  a->is_set = true;
  a->neg = neg;
  snprintf(a->set, sizeof a->set, "%s", set);
  return 0;
}

static int emit_set(tr *t, const atom *a) {
  if (a->cp == 0xFFFFFFFF) return emit(t, a->set); /* \A \z \Z */
  emit(t, a->neg ? "[^" : "[");
  emit(t, a->set);
  return emit(t, "]");
}

/* A literal under (?i): Oniguruma folds case with multi-character folds (ß = ss, ﬁ = fi)
 * that PCRE2 does not have; refuse what could meet one. */
static int literal_icase(tr *t, uint32_t cp) {
  if (!t->icase[t->depth]) return 0;
  const bool letter = (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
  if (cp >= 0x80) return refuse(t, "a non-ASCII literal under (?i)");
  if (letter && t->prev_letter >= 0) {
    const int p = t->prev_letter | 0x20, c = (int)(cp | 0x20);
    if ((p == 's' && (c == 's' || c == 't')) ||
        (p == 'f' && (c == 'f' || c == 'i' || c == 'l')))
      return refuse(t, "a letter pair under (?i) that a ligature or sharp s folds to");
  }
  return 0;
}

static bool is_digit(uint8_t c) { return c >= '0' && c <= '9'; }

/* After an atom: a quantifier, if any. */
static int quantifier(tr *t) {
  while (!t->err && t->i < t->n) {
    const uint8_t c = t->s[t->i];
    if (c == '*' || c == '+' || c == '?') {
      t->i++;
      char q[2] = {(char)c, 0};
      emit(t, q);
      if (t->i < t->n && (t->s[t->i] == '?' || t->s[t->i] == '+')) {
        q[0] = (char)t->s[t->i++];
        emit(t, q);
      }
      continue;
    }
    if (c != '{') break;
    /* {n} {n,} {,m} {n,m}; anything else is a literal brace in Oniguruma */
    size_t k = t->i + 1;
    unsigned long lo = 0, hi = 0;
    bool has_lo = false, has_hi = false, comma = false;
    for (; k < t->n && is_digit(t->s[k]) && lo < 1000000; k++, has_lo = true)
      lo = lo * 10 + (unsigned long)(t->s[k] - '0');
    if (k < t->n && t->s[k] == ',') {
      comma = true;
      k++;
      for (; k < t->n && is_digit(t->s[k]) && hi < 1000000; k++, has_hi = true)
        hi = hi * 10 + (unsigned long)(t->s[k] - '0');
    }
    if (k >= t->n || t->s[k] != '}' || (!has_lo && !has_hi)) break; /* a literal { */
    if (lo > 65535 || hi > 65535) return refuse(t, "a repeat count above 65535");
    t->i = k + 1;
    char q[48];
    if (!comma) snprintf(q, sizeof q, "{%lu}", lo);
    else if (!has_hi) snprintf(q, sizeof q, "{%lu,}", lo);
    else snprintf(q, sizeof q, "{%lu,%lu}", lo, hi);
    emit(t, q);
    if (t->i < t->n && t->s[t->i] == '+') return refuse(t, "{n,m}+ (not possessive in Oniguruma)");
    if (t->i < t->n && t->s[t->i] == '?') {
      if (!comma) return refuse(t, "{n}? (an optional repeat in Oniguruma)");
      t->i++;
      emit(t, "?");
    }
  }
  return t->err;
}

/* A character class; t->i is past the '['. Items go into pos (PCRE2 class contents);
 * negated shorthands (\S \W \H) go to neg, rewritten with lookaheads. */
static int char_class(tr *t) {
  sc_tok_text pos = {0}, negs[8];
  size_t nneg = 0;
  bool negated = false;
  if (t->i < t->n && t->s[t->i] == '^') {
    negated = true;
    t->i++;
  }
  if (t->i < t->n && t->s[t->i] == ']') refuse(t, "']' first in a class");
  bool closed = false;
  while (!t->err && t->i < t->n) {
    const uint8_t c = t->s[t->i];
    if (c == ']') {
      t->i++;
      closed = true;
      break;
    }
    if (c == '[') {
      refuse(t, "a nested class or POSIX bracket");
      break;
    }
    if (c == '&' && t->i + 1 < t->n && t->s[t->i + 1] == '&') {
      refuse(t, "class intersection (&&)");
      break;
    }
    atom a = {0};
    if (c == '\\') {
      t->i++;
      if (escape(t, true, &a) != 0) break;
    } else {
      a.cp = next_cp(t);
    }
    if (a.is_set) {
      if (a.neg) {
        if (nneg == sizeof negs / sizeof negs[0]) {
          refuse(t, "too many negated shorthands in one class");
          break;
        }
        negs[nneg] = (sc_tok_text){0};
        if (put_str(&negs[nneg++], a.set) != 0) t->err = SC_ENOMEM;
      } else if (put_str(&pos, a.set) != 0) {
        t->err = SC_ENOMEM;
      }
      continue;
    }
    uint32_t hi = a.cp;
    if (t->i + 1 < t->n && t->s[t->i] == '-' && t->s[t->i + 1] != ']') {
      t->i++;
      atom b = {0};
      if (t->s[t->i] == '\\') {
        t->i++;
        if (escape(t, true, &b) != 0) break;
        if (b.is_set) {
          refuse(t, "a range ending in a set");
          break;
        }
      } else {
        b.cp = next_cp(t);
      }
      hi = b.cp;
      if (hi < a.cp) {
        refuse(t, "a range out of order");
        break;
      }
    }
    if (t->icase[t->depth] && (a.cp >= 0x80 || hi >= 0x80)) {
      refuse(t, "a non-ASCII class member under (?i)");
      break;
    }
    char b[40];
    if (hi == a.cp) snprintf(b, sizeof b, "\\x{%X}", (unsigned)a.cp);
    else snprintf(b, sizeof b, "\\x{%X}-\\x{%X}", (unsigned)a.cp, (unsigned)hi);
    if (put_str(&pos, b) != 0) t->err = SC_ENOMEM;
  }
  if (!t->err && !closed) refuse(t, "an unterminated class");
  if (!t->err && pos.len == 0 && nneg == 0) refuse(t, "an empty class");
  if (!t->err) {
    if (nneg == 0) {
      emit(t, negated ? "[^" : "[");
      emit(t, pos.data);
      emit(t, "]");
    } else if (!negated) { /* c in pos, or outside some negated set */
      emit(t, "(?:");
      if (pos.len) {
        emit(t, "[");
        emit(t, pos.data);
        emit(t, "]|");
      }
      for (size_t k = 0; k < nneg; k++) {
        emit(t, k ? "|[^" : "[^");
        emit(t, negs[k].data);
        emit(t, "]");
      }
      emit(t, ")");
    } else { /* c outside pos, and inside every negated set */
      emit(t, "(?:");
      for (size_t k = pos.len ? 0 : 1; k < nneg; k++) {
        emit(t, "(?=[");
        emit(t, negs[k].data);
        emit(t, "])");
      }
      if (pos.len) {
        emit(t, "[^");
        emit(t, pos.data);
      } else {
        emit(t, "[");
        emit(t, negs[0].data);
      }
      emit(t, "])");
    }
  }
  free(pos.data);
  for (size_t k = 0; k < nneg; k++) free(negs[k].data);
  return t->err;
}

/* "(?" constructs; t->i is past "(?". */
static int group_open(tr *t) {
  if (t->depth + 1 >= (int)(sizeof t->icase / sizeof t->icase[0]))
    return refuse(t, "groups nested too deep");
  const bool inherit = t->icase[t->depth];
  if (t->i >= t->n) return refuse(t, "an unterminated group");
  const uint8_t c = t->s[t->i];
  const char *open = NULL;
  size_t skip = 1;
  if (c == ':') open = "(?:";
  else if (c == '=') open = "(?=";
  else if (c == '!') open = "(?!";
  else if (c == '>') open = "(?>";
  else if (c == '<' && t->i + 1 < t->n && t->s[t->i + 1] == '=') open = "(?<=", skip = 2;
  else if (c == '<' && t->i + 1 < t->n && t->s[t->i + 1] == '!') open = "(?<!", skip = 2;
  if (open) {
    t->i += skip;
    t->icase[++t->depth] = inherit;
    return emit(t, open);
  }
  if (c == '<' || c == '\'') { /* a named group: captures do not matter here */
    const uint8_t end = c == '<' ? '>' : '\'';
    size_t k = t->i + 1;
    while (k < t->n && t->s[k] != end) k++;
    if (k >= t->n) return refuse(t, "an unterminated group name");
    t->i = k + 1;
    t->icase[++t->depth] = inherit;
    return emit(t, "(?:");
  }
  if (c == '#') { /* a comment */
    while (t->i < t->n && t->s[t->i] != ')') t->i++;
    if (t->i >= t->n) return refuse(t, "an unterminated comment");
    t->i++;
    return 1; /* nothing opened */
  }
  /* options: only i */
  bool on = true, icase = inherit;
  while (t->i < t->n && t->s[t->i] != ':' && t->s[t->i] != ')') {
    const uint8_t o = t->s[t->i];
    if (o == '-') on = false;
    else if (o == 'i') icase = on;
    else return refuse(t, "an inline option other than i (m is dotall in Oniguruma)");
    t->i++;
  }
  if (t->i >= t->n) return refuse(t, "an unterminated option group");
  if (t->s[t->i] == ')') { /* (?i) to the end of the enclosing group */
    t->i++;
    t->icase[t->depth] = icase;
    emit(t, icase ? "(?i)" : "(?-i)");
    return 1;
  }
  t->i++;
  t->icase[++t->depth] = icase;
  return emit(t, icase ? "(?i:" : "(?-i:");
}

int tk_onig_to_pcre2(const char *src, size_t len, char **out, sc_diag *d) {
  tr t = {.s = (const uint8_t *)src, .n = len, .src = src, .srclen = len, .d = d,
          .prev_letter = -1};
  *out = NULL;
  while (!t.err && t.i < t.n) {
    const uint8_t c = t.s[t.i];
    int letter = -1;
    if (c == '\\') {
      t.i++;
      atom a;
      if (escape(&t, false, &a) != 0) break;
      if (a.is_set) {
        emit_set(&t, &a);
      } else {
        if (literal_icase(&t, a.cp) != 0) break;
        emit_cp(&t, a.cp);
        if ((a.cp | 0x20) >= 'a' && (a.cp | 0x20) <= 'z') letter = (int)a.cp;
      }
    } else if (c == '[') {
      t.i++;
      if (char_class(&t) != 0) break;
    } else if (c == '(') {
      t.i++;
      if (t.i < t.n && t.s[t.i] == '?') {
        t.i++;
        const int r = group_open(&t);
        if (r < 0) break;
        if (r == 1) {
          t.prev_letter = -1;
          continue; /* an option switch or comment: no atom, no quantifier */
        }
      } else {
        if (t.depth + 1 >= (int)(sizeof t.icase / sizeof t.icase[0])) {
          refuse(&t, "groups nested too deep");
          break;
        }
        t.icase[t.depth + 1] = t.icase[t.depth];
        t.depth++;
        emit(&t, "(?:");
      }
      t.prev_letter = -1;
      continue; /* a quantifier cannot follow an opening parenthesis */
    } else if (c == ')') {
      t.i++;
      if (t.depth == 0) {
        refuse(&t, "an unbalanced ')'");
        break;
      }
      t.depth--;
      emit(&t, ")");
    } else if (c == '|') {
      t.i++;
      emit(&t, "|");
      t.prev_letter = -1;
      continue;
    } else if (c == '^' || c == '$') {
      refuse(&t, "^ and $ (line anchors in Oniguruma)");
      break;
    } else if (c == '.') {
      t.i++;
      emit(&t, "[^\\n]");
    } else if (c == '*' || c == '+' || c == '?') {
      refuse(&t, "a repeat with nothing to repeat");
      break;
    } else {
      const uint32_t cp = next_cp(&t);
      if (literal_icase(&t, cp) != 0) break;
      emit_cp(&t, cp);
      if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') letter = (int)cp;
    }
    t.prev_letter = letter;
    quantifier(&t);
  }
  if (!t.err && t.depth != 0) refuse(&t, "an unterminated group");
  if (t.err) {
    free(t.out.data);
    return t.err;
  }
  if (t.out.data == NULL) { /* the empty pattern */
    t.out.data = calloc(1, 1);
    if (t.out.data == NULL) return SC_ENOMEM;
  }
  *out = t.out.data;
  return 0;
}

