#!/usr/bin/env python3
"""Test data for the C tokenizer (model/tokenizer.h), made with Hugging Face `tokenizers`.

Re-create the files (tokenizers 0.23.3 made the committed ones; another version may train
other merges, which is fine as long as the C side agrees with it):

    python3 -m venv /tmp/tokvenv && /tmp/tokvenv/bin/pip install tokenizers==0.23.3
    /tmp/tokvenv/bin/python tests/data/tokenizer/make_reference.py

That writes, next to this script:
  tokenizer.json               a small byte-level BPE (2266 merges: the training text
                               runs out of pairs) trained on TRAIN_TEXT below, configured
                               as DeepSeek-V3's file is: normalizer Sequence [],
                               pre-tokenizer Sequence of its three Split regexes and
                               ByteLevel (no prefix space, no regex), BPE without byte
                               fallback and merges as "a b" strings, ByteLevel decoder (all
                               seen in copies of the real file); TemplateProcessing
                               "<bos> $A" and the added tokens' flags (normalized, special
                               but for the 14 named ones) as LlamaTokenizerFast writes
                               them (not seen); 10 of the 798 place holders, <think>
                               </think>, then the 15 named tokens, as V3.1/V3.2 lay them out
  tokenizer_bytefallback.json  a Llama-2-style one: normalizer Prepend("▁") + Replace(" ",
                               "▁"), no pre-tokenizer, BPE with byte_fallback, unk_token and
                               fuse_unk, merges as ["a", "b"] pairs, decoder Replace +
                               ByteFallback + Fuse + Strip, plus added tokens with every
                               flag (lstrip, rstrip, single_word, normalized true/false)
  reference.jsonl              per line, for one of the two tokenizers ("tokenizer"):
                               {"text", "ids" (no special tokens), "ids_special" (with),
                               "decode" and "decode_skip" (HF's decode of ids_special with
                               skip_special_tokens false / true)}, or, for id lists that
                               encode never produces (cut UTF-8 sequences, lone specials),
                               {"ids", "decode", "decode_skip"}
The texts are the lines of corpus.txt (split on "\\n" only) plus SYNTHETIC below.

Check mode (ctest `tokenizer_hf`): compares the C tokenizer, through the test driver
tests/unit/tokenizer_driver.c, with `tokenizers` live: every reference case, 400 random
strings drawn from an adversarial alphabet, streamed decodes of random id lists, 28 more
configurations made from the two files (variants()), and the members of every regex
class the translation touches over planes 0-2 and 14 (differences on code points that
PCRE2's older Unicode leaves unassigned are printed as notes, not failures):

    make_reference.py --check build/tests/unit/tokenizer_driver [--tokenizer FILE ...]

--tokenizer adds any other tokenizer.json (e.g. DeepSeek's own) to the live check.
Exit status 0 agree, 1 a difference (printed), 77 (ctest's skip) when `tokenizers`
cannot be imported by this python.
"""
import argparse
import json
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

try:
    import tokenizers
    from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                            pre_tokenizers, processors, trainers)
except ImportError:
    print("tokenizer_hf skipped: the Python package `tokenizers` is not importable by "
          f"{sys.executable}. To enable it: python3 -m venv /tmp/tokvenv && "
          "/tmp/tokvenv/bin/pip install tokenizers, then "
          "cmake -DSC_TOKENIZER_PYTHON=/tmp/tokvenv/bin/python build")
    sys.exit(77)

BOS, EOS, PAD = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"

# DeepSeek-V3's pre-tokenizer regexes, verbatim from its tokenizer.json.
DS_DIGITS = r"\p{N}{1,3}"
DS_CJK = "[一-龥぀-ゟ゠-ヿ]+"
DS_MAIN = ("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
           "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+")

# DeepSeek-V3's named added tokens after the place holders (ids 128800...): all
# normalized, not special, except <|EOT|>.
DS_NAMED = ["<｜fim▁hole｜>", "<｜fim▁begin｜>", "<｜fim▁end｜>", "<｜User｜>", "<｜Assistant｜>",
            "<|EOT|>", "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>",
            "<｜tool▁call▁end｜>", "<｜tool▁outputs▁begin｜>", "<｜tool▁outputs▁end｜>",
            "<｜tool▁output▁begin｜>", "<｜tool▁output▁end｜>", "<｜tool▁sep｜>"]
DS_THINK = ["<think>", "</think>"]  # DeepSeek-R1 / V3.1 / V3.2 have these (not special)
N_PLACE_HOLDERS = 12

TRAIN_TEXT = """
The history of computing is full of small ideas that changed everything. Byte pair encoding
started as a compression method: replace the most frequent pair of bytes with a new symbol,
and repeat until the text stops shrinking. Language models use the same idea to build a
vocabulary of subwords, so that frequent words become single tokens while rare words are
spelled out from smaller pieces. A tokenizer must be exact: the same text must always give
the same tokens, on every machine, or the model sees a language it was never trained on.
It's the small details that matter: we'll see that they're easy to get wrong, and you'd be
surprised how often I've seen it happen. Don't trust, verify! Isn't that the rule?
In 2024 the team trained on 14.8 trillion tokens; the model has 671 billion parameters, of
which 37 billion are active for each token. Numbers such as 3.14159, 2.71828, 1,000,000 and
0.001 appear in text, as do dates like 2024-12-26, times like 12:30:45 and prices like $19.99.
def tokenize(text, vocab, merges):
    words = pre_tokenize(text)
    out = []
    for word in words:
        out.extend(bpe(word, vocab, merges))
    return out

int main(int argc, char **argv) {
    for (int i = 0; i < argc; i++) printf("%s\\n", argv[i]);
    return 0;
}
SELECT name, count(*) FROM events GROUP BY name HAVING count(*) > 10 ORDER BY 2 DESC;
{"model": "deepseek", "layers": 61, "hidden": 7168, "experts": [256, 8], "ok": true}
<html><body><p class="note">Hello &amp; welcome</p></body></html>
人工智能是计算机科学的一个分支，它企图了解智能的实质，并生产出一种新的能以人类智能相似的方式做出反应的智能机器。
该领域的研究包括机器人、语言识别、图像识别、自然语言处理和专家系统等。自从人工智能诞生以来，理论和技术日益成熟。
我们的模型在中文和英文上都进行了大量的训练，数学和代码能力也得到了显著的提升。今天天气很好，我们一起去散步吧。
日本語の文章も学習データに含まれています。ひらがな、カタカナ、そして漢字が使われます。
東京は日本の首都です。コンピューターとプログラミングの勉強をしています。ありがとうございました。
한국어는 한글로 표기합니다. 대한민국의 수도는 서울입니다. 감사합니다, 좋은 하루 보내세요.
Русский язык является одним из самых распространённых языков мира. Москва — столица России.
Мы изучаем машинное обучение и обработку естественного языка. Спасибо за внимание!
Ελληνικά γράμματα: άλφα, βήτα, γάμμα, δέλτα. Η Αθήνα είναι η πρωτεύουσα της Ελλάδας.
Français : les élèves étudient à l'école ; ça va très bien, merci beaucoup ! Où est la gare ?
Deutsch: Die Straße ist schön. Über den Wolken muss die Freiheit wohl grenzenlos sein.
Español: el niño comió una manzana, ¿verdad? ¡Qué bueno! Año nuevo, vida nueva.
Emoji are text too: 😀 😂 🚀 ✨ 👍 🎉 ❤️ 🇫🇷 — and so are symbols like ©, ®, ™, °, ±, ×, ÷.
Whitespace:    four spaces,\ttabs\t\tand\r\nWindows line ends\r\n\r\nand blank lines

and more.
"""


def train_text():
    """TRAIN_TEXT plus generated lines (numbers, identifiers), deterministic."""
    rng = random.Random(1234)
    lines = TRAIN_TEXT.split("\n")
    for i in range(400):
        a, b = rng.randrange(10**rng.randrange(1, 7)), rng.randrange(1000)
        lines.append(f"item_{i} = compute({a}, {b}) + {a * b % 977}  # value {i * 37 % 101}")
    return lines


def deepseek_like():
    tok = Tokenizer(models.BPE(byte_fallback=False))
    tok.normalizer = normalizers.Sequence([])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(DS_DIGITS), behavior="isolated", invert=False),
        pre_tokenizers.Split(Regex(DS_CJK), behavior="isolated", invert=False),
        pre_tokenizers.Split(Regex(DS_MAIN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    specials = [AddedToken(t, normalized=True, special=True) for t in (BOS, EOS, PAD)]
    trainer = trainers.BpeTrainer(vocab_size=3300, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(train_text(), trainer)
    # As DeepSeek-V3.1/V3.2 lay them out: place holders, the last two of which are
    # <think> and </think> (128798, 128799), then the named tokens (128800...).
    tok.add_special_tokens([AddedToken(f"<｜place▁holder▁no▁{i}｜>", normalized=True, special=True)
                            for i in range(N_PLACE_HOLDERS - 2)])
    tok.add_tokens([AddedToken(t, normalized=True, special=(t == "<|EOT|>"))
                    for t in DS_THINK + DS_NAMED])
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS}:0 $A:0", pair=f"{BOS}:0 $A:0 {BOS}:1 $B:1",
        special_tokens=[(BOS, tok.token_to_id(BOS))])
    js = json.loads(tok.to_str())
    # The layout of DeepSeek's own file: merges as "a b" strings, no ignore_merges key.
    m = js["model"]
    m["merges"] = [f"{a} {b}" for a, b in m["merges"]]
    del m["ignore_merges"]
    js["model"] = {k: m[k] for k in ("type", "dropout", "unk_token", "continuing_subword_prefix",
                                     "end_of_word_suffix", "fuse_unk", "byte_fallback", "vocab",
                                     "merges")}
    return js


def bytefallback_like():
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    # Words for training only: the saved tokenizer has no pre-tokenizer, as Llama 2's.
    tok.pre_tokenizer = pre_tokenizers.Split("▁", behavior="merged_with_next")
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    specials = ["<unk>", "<s>", "</s>"] + byte_tokens
    # The 150 most frequent characters (ties by code point: the trainer's own cut is not
    # deterministic); the rest is left to byte fallback.
    counts = {}
    for line in train_text():
        for c in "▁" + line.replace(" ", "▁"):
            counts[c] = counts.get(c, 0) + 1
    alphabet = sorted(counts, key=lambda c: (-counts[c], ord(c)))[:150]
    trainer = trainers.BpeTrainer(vocab_size=1500, special_tokens=specials, show_progress=False,
                                  initial_alphabet=alphabet, limit_alphabet=len(alphabet))
    tok.train_from_iterator(train_text(), trainer)
    tok.pre_tokenizer = None
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    tok.post_processor = processors.TemplateProcessing(
        single="<s>:0 $A:0", pair="<s>:0 $A:0 <s>:1 $B:1",
        special_tokens=[("<s>", tok.token_to_id("<s>"))])
    js = json.loads(tok.to_str())
    # The byte tokens belong to the model's vocabulary only (as in Llama's file).
    js["added_tokens"] = [t for t in js["added_tokens"] if t["content"] not in byte_tokens]
    tok = Tokenizer.from_str(json.dumps(js))
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, normalized=False, special=True)])
    tok.add_tokens([
        AddedToken("[R]", rstrip=True, normalized=False),
        AddedToken("<both>", lstrip=True, rstrip=True, normalized=False),
        AddedToken("<br>", single_word=True, normalized=False),
        AddedToken("word", single_word=True, normalized=True),
        AddedToken("Hello World", normalized=True),
        AddedToken("▁tick", normalized=False),
    ])
    return json.loads(tok.to_str())


SYNTHETIC = [
    "", " ", "  ", "\n", "\r\n", "\r\n\r\n", "\t", " \t \n ", "a", "A", "ab", "é", "\x00",
    "\x00a\x00", "\x7f\x01\x1b[31mred\x1b[0m",
    "line one\r\nline two\r\n\r\n  indented\n\n\n\ttabbed\n",
    "trailing newline\n", "\n\nleading newlines", "x\n \n \ny",
    "word.\nNext:\r\n- item\r\n- item2\n",
    "end.\n\n\n", "a  \n  b", "   \n", "!\n", "?\r\n", "foo!!!\n\nbar",
    "1234567890", "0" * 10, "٣٤٥ ١٢٣٤", "१२३४५", "①②③④", "Ⅻ", "²³⁴", "12:30", "v1.2.3",
    "x" * 300, "ab" * 200, "😀" * 50, "漢字" * 60, "あ" * 100, " " * 100, "\n" * 50, "." * 99,
    "a" * 64 + " " + "b" * 64,
    "Zero\u200bwidth\u200cjoiners\u200d and BOM \ufeff and soft\u00adhyphen",
    "Private use \ue000\uf8ff and plane 15 \U000f0000 and nonchar \ufffe\uffff",
    "Replacement char \ufffd in input",
    "Max \U0010ffff and supplementary \U00020000\U0002a6d6 CJK ext B",
    "Halfwidth ｶﾀｶﾅ and ideographic comma、full stop。",
    "Kelvin \u212a and long s \u017f and dotless \u0131 and \u0130",
    "Tags \U000e0041\U000e0042 and variation selectors \u2764\ufe0f \u2764\ufe0e",
    "Devanagari with virama: क्षत्रिय, and Thai with marks: ที่",
    "Hangul jamo: \u1100\u1161\u11a8 vs 각",
    "Emoji modifiers: 👋🏻👋🏼👋🏽👋🏾👋🏿 and keycap 1️⃣ #️⃣",
    "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜begin▁of▁sentence｜><｜begin▁of▁sentence｜>",
    "<｜User｜><｜Assistant｜>", "<｜User｜>hi<｜Assistant｜>", " <｜User｜> ", "a<｜User｜>b",
    "<｜User｜", "｜User｜>", "<｜Use<｜User｜>r｜>", "<<｜User｜>>", "<｜place▁holder▁no▁1｜>",
    "<｜place▁holder▁no▁11｜><｜place▁holder▁no▁1｜>", "<|EOT|>", "<|EOT|", "<think></think>",
    "<s>", "</s>", "<unk>", "<s>hello</s>", " <s> ", "<mask>", "a <mask> b", "a   <mask>", "<mask>   x",
    "x [R]   y", "x[R]\n\ny", "a  <both>  b", "<both>", "a<br>b", "a <br> b", "<br>", "<br>x",
    "x<br>", "é<br>", "_<br>", "1<br>2", "word", "a word b", "sword", "words", "a word", "word!",
    "Hello World", "Hello World!", "Hello  World", "xHello World", "▁tick", "tick", " tick",
    "a▁tick", "<0x41>", "<0xZZ>", "<0x41", "hello <0x0A> world",
    "ſ", "ŉ", "ǅ", "ﬁ ﬂ ﬀ ﬃ", "ß SS ẞ", "İ i̇",
]


def cases():
    with open(os.path.join(HERE, "corpus.txt"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    seen, out = set(), []
    for t in lines + SYNTHETIC + [
            "\n".join(lines[i:i + 3]) for i in range(0, len(lines), 7)] + [
            "\r\n".join(lines[i:i + 2]) for i in range(3, len(lines), 11)]:
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out


def id_cases(tok, rng, n=60):
    """Id lists encode never makes: single byte tokens that cut UTF-8 sequences apart,
    specials and added tokens in odd places, runs of byte tokens."""
    size = tok.get_vocab_size(with_added_tokens=True)
    vocab = tok.get_vocab(with_added_tokens=True)
    low = sorted(i for s, i in vocab.items() if len(s) == 1 or s.startswith("<0x"))
    out = []
    for k in range(n):
        m = rng.randrange(1, 12)
        ids = []
        for _ in range(m):
            r = rng.random()
            ids.append(rng.choice(low) if r < 0.6 else rng.randrange(size))
        out.append(ids)
    return out


def reference_lines():
    rng = random.Random(20240611)
    out = []
    for name in ("tokenizer.json", "tokenizer_bytefallback.json"):
        tok = Tokenizer.from_file(os.path.join(HERE, name))
        for text in cases():
            ids = tok.encode(text, add_special_tokens=False).ids
            ids_s = tok.encode(text, add_special_tokens=True).ids
            out.append({"tokenizer": name, "text": text, "ids": ids, "ids_special": ids_s,
                        "decode": tok.decode(ids_s, skip_special_tokens=False),
                        "decode_skip": tok.decode(ids_s, skip_special_tokens=True)})
        for ids in id_cases(tok, rng):
            out.append({"tokenizer": name, "ids": ids,
                        "decode": tok.decode(ids, skip_special_tokens=False),
                        "decode_skip": tok.decode(ids, skip_special_tokens=True)})
    return out


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)
        f.write("\n")


def generate():
    write_json(os.path.join(HERE, "tokenizer.json"), deepseek_like())
    write_json(os.path.join(HERE, "tokenizer_bytefallback.json"), bytefallback_like())
    with open(os.path.join(HERE, "reference.jsonl"), "w", encoding="utf-8") as f:
        for line in reference_lines():
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    print(f"wrote tokenizer.json, tokenizer_bytefallback.json, reference.jsonl "
          f"(tokenizers {tokenizers.__version__})")


# ---- check mode -------------------------------------------------------------------------

# Character classes whose translation from Oniguruma to PCRE2 the C side does itself (or
# trusts to PCRE2): each is matched against every code point by both sides.
CLASS_PATTERNS = [r"\s", r"\S", r"\w", r"\W", r"\d", r"\h", r"\p{L}", r"\p{N}", r"\p{P}",
                  r"\p{S}", r"\p{M}", r"\p{Han}", r"\p{^L}", r"[^\s\p{L}\p{N}]", r"[^\S\r\n]",
                  r"[^\W\d]", r"[\w]", r"(?i)k", r"(?i)s", r"(?i:[a-f])", r".", r"\x{3000}|\u00a0", r"x*",
                  DS_CJK]
# Every code point of planes 0-2 (all of Unicode's letters but a few), plane 14's tags and
# variation selectors, and the ends of the private-use planes.
CLASS_CHARS = [c for c in range(0x323B0) if not 0xD800 <= c < 0xE000] + list(
    range(0xE0000, 0xE01F0)) + [0xF0000, 0xFFFFD, 0x100000, 0x10FFFD]

ALPHABET = (list(" \t\r\n\x0b\x0c\x85\xa0\u2028\u3000\u180e\u200b") + list("aZé!?.,;:'\"-_/\\#$%")
            + list("0123456789٣१①²½") + list("漢字あアｶ한글Жжλ") + ["😀", "👍🏽", "\u0301", "\u0308"]
            + ["<｜User｜>", "<s>", "<mask>", "[R]", "<br>", "word", "▁", "'s", "'ll"])


class Driver:
    def __init__(self, exe, tokenizer_path):
        self.p = subprocess.Popen([exe, tokenizer_path], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, encoding="utf-8",
                                  errors="surrogateescape")

    def ask(self, req):
        self.p.stdin.write(json.dumps(req, ensure_ascii=True) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("the driver died")
        return json.loads(line)

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def check_one(drv, tok, name, texts, id_lists, fails):
    for text in texts:
        want = {"ids": tok.encode(text, add_special_tokens=False).ids}
        want["ids_special"] = tok.encode(text, add_special_tokens=True).ids
        want["decode"] = tok.decode(want["ids_special"], skip_special_tokens=False)
        want["decode_skip"] = tok.decode(want["ids_special"], skip_special_tokens=True)
        got = drv.ask({"text": text})
        for k, v in want.items():
            if got.get(k) != v:
                fails.append(f"{name}: {k} of {text!r}: C {got.get(k, got.get('error'))!r} "
                             f"HF {v!r}")
    for ids in id_lists:
        got = drv.ask({"ids": ids})
        for skip, key in ((False, "decode"), (True, "decode_skip")):
            v = tok.decode(ids, skip_special_tokens=skip)
            if got.get(key) != v:
                fails.append(f"{name}: {key} of {ids}: C {got.get(key, got.get('error'))!r} "
                             f"HF {v!r}")
        if got.get("stream_ok") is not True:
            fails.append(f"{name}: streamed decode of {ids}: {got.get('stream_ok')}")


def check_classes(drv, fails, notes):
    """Each pattern of CLASS_PATTERNS against every code point of CLASS_CHARS. PCRE2
    knows an older Unicode than the Oniguruma in tokenizers may: code points unassigned
    in PCRE2's version (its \\p{Cn}) are noted, not failed (tokenizer.h says so)."""
    sep = "\x01"
    text = sep.join(chr(c) for c in CLASS_CHARS)
    cn = drv.ask({"split": r"\p{Cn}", "text": text})["pieces"]
    unassigned = {p for p in cn if sep not in p}
    for pat in CLASS_PATTERNS:
        hf = [p for p, _ in pre_tokenizers.Split(Regex(pat), "isolated").pre_tokenize_str(text)]
        got = drv.ask({"split": pat, "text": text})
        if "error" in got:
            fails.append(f"class {pat!r}: C refuses it: {got['error']}")
            continue
        if got["pieces"] == hf:
            continue
        a = {p for p in hf if sep not in p}
        b = {p for p in got["pieces"] if sep not in p}
        diff = a ^ b
        real = sorted(c for c in diff if not (len(c) == 1 and c in unassigned))
        if real:
            fails.append(f"class {pat!r}: C and HF differ on "
                         f"{[hex(ord(c[0])) for c in real[:12]]} ({len(real)} pieces)")
        elif len(diff) == 0 and len(got["pieces"]) != len(hf):
            fails.append(f"class {pat!r}: C and HF cut the text differently")
        else:
            notes.append(f"class {pat!r}: {len(diff)} code points unassigned in PCRE2's "
                         "Unicode version classify differently")


def variants():
    """Other configurations than the two committed files, made from them: every Split
    behavior with and without invert, ByteLevel with its regex and prefix space, a regex
    Replace normalizer, unk_token with and without fuse_unk, decoder chains, no decoder.
    (name, tokenizer.json as a dict)"""
    with open(os.path.join(HERE, "tokenizer.json"), encoding="utf-8") as f:
        ds = json.load(f)
    with open(os.path.join(HERE, "tokenizer_bytefallback.json"), encoding="utf-8") as f:
        bf = json.load(f)
    out = []
    for behavior in ("Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous"):
        for invert in (False, True):
            for pat in ({"String": " "}, {"Regex": r"\s+|[,.!?]|(?=[A-Z])"}):
                v = json.loads(json.dumps(ds))
                v["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
                    {"type": "Split", "pattern": pat, "behavior": behavior, "invert": invert},
                    {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                     "use_regex": True}]}
                out.append((f"Split {pat} {behavior} invert={invert}", v))
    v = json.loads(json.dumps(ds))
    v["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True}
    v["normalizer"] = {"type": "Replace", "pattern": {"Regex": r"[aeiou]+"}, "content": "*"}
    out.append(("ByteLevel regex + Replace normalizer", v))
    v = json.loads(json.dumps(ds))
    v["decoder"] = None
    v["post_processor"] = {"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        {"type": "TemplateProcessing", "single": [
            {"SpecialToken": {"id": "<｜begin▁of▁sentence｜>", "type_id": 0}},
            {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<|EOT|>", "type_id": 1}}],
         "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
         "special_tokens": {
             "<｜begin▁of▁sentence｜>": {"id": "<｜begin▁of▁sentence｜>", "ids": [0],
                                       "tokens": ["<｜begin▁of▁sentence｜>"]},
             "<|EOT|>": {"id": "<|EOT|>", "ids": [ds["added_tokens"][-1]["id"], 1],
                         "tokens": ["x", "y"]}}}]}
    out.append(("no decoder, processor Sequence", v))
    for fuse in (True, False):  # unknown characters without byte fallback
        v = json.loads(json.dumps(bf))
        v["model"]["byte_fallback"] = False
        v["model"]["fuse_unk"] = fuse
        out.append((f"unk_token, fuse_unk={fuse}", v))
    for dec in (
            [{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}],
            [{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never", "split": True},
             {"type": "ByteFallback"}, {"type": "Fuse"}],
            [{"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Replace",
             "pattern": {"String": "▁"}, "content": " "}, {"type": "Strip", "content": " ",
             "start": 2, "stop": 0}],
            [{"type": "Replace", "pattern": {"Regex": "▁+"}, "content": "_"},
             {"type": "ByteFallback"}, {"type": "Strip", "content": "_", "start": 1, "stop": 0},
             {"type": "Fuse"}, {"type": "Metaspace", "replacement": "o", "prepend_scheme": "first"}]):
        v = json.loads(json.dumps(bf))
        v["decoder"] = {"type": "Sequence", "decoders": dec}
        out.append((f"decoder {[d['type'] for d in dec]}", v))
    return out


def check(exe, extra):
    rng = random.Random(7)
    fails, notes = [], []
    texts = cases()
    for k in range(400):
        n = rng.randrange(1, 40)
        texts.append("".join(rng.choice(ALPHABET) for _ in range(n)))
    paths = [os.path.join(HERE, n) for n in ("tokenizer.json", "tokenizer_bytefallback.json")]
    for path in paths + list(extra):
        tok = Tokenizer.from_file(path)
        drv = Driver(exe, path)
        try:
            check_one(drv, tok, os.path.basename(path), texts, id_cases(tok, rng, 300), fails)
            if path == paths[0]:
                check_classes(drv, fails, notes)
        finally:
            drv.close()
        print(f"{path}: {len(texts)} texts checked")
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        for name, js in variants():
            path = os.path.join(tmp, "v.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(js, f, ensure_ascii=False)
            tok = Tokenizer.from_file(path)
            drv = Driver(exe, path)
            try:
                check_one(drv, tok, name, texts[::3], id_cases(tok, rng, 40), fails)
            finally:
                drv.close()
        print(f"{len(variants())} other configurations checked")
    with open(os.path.join(HERE, "reference.jsonl"), encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            tok = Tokenizer.from_file(os.path.join(HERE, r["tokenizer"]))
            if "text" in r and tok.encode(r["text"], add_special_tokens=False).ids != r["ids"]:
                fails.append(f"reference.jsonl is stale (this tokenizers gives other ids for "
                             f"{r['text']!r}): re-generate it")
                break
    for n in notes:
        print("NOTE", n)
    for f in fails[:50]:
        print("DIFF", f)
    print(f"tokenizers {tokenizers.__version__}: {len(fails)} differences")
    return 1 if fails else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", metavar="DRIVER", help="check the C tokenizer through DRIVER")
    ap.add_argument("--tokenizer", action="append", default=[],
                    help="another tokenizer.json for the live check")
    a = ap.parse_args()
    if a.check:
        sys.exit(check(a.check, a.tokenizer))
    generate()


if __name__ == "__main__":
    main()
