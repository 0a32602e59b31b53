#!/usr/bin/env python3
"""make_seeds.py - (re)writes fuzz/corpus/<target>/seed-* from the tests' data: the bundled experiments,
../shared/golden files (small ones, or cut down), and inputs shaped like the unit tests' inline data.
Run from the repository root; only the standard library is needed. Regression inputs (crash-*, minimised
finds) in the same folders are left alone."""
import bz2, json, os, struct, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(ROOT, "..", "shared", "golden")
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def read(*p):
    with open(os.path.join(*p), "rb") as f:
        return f.read()


def safetensors(tensors, metadata=None):
    header, blobs, off = {}, b"", 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        blobs += raw
        off += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + blobs


def main():
    # experiment: a.toml [#--- b.toml [#--- c.toml [#--- --set lines]]]
    ex = os.path.join(ROOT, "experiments")
    base = read(ex, "glue_base.toml").decode()
    mrpc = read(ex, "glue_mrpc.toml").decode().replace('"glue_base.toml"', '"b.toml"')
    put("experiment", "glue_mrpc", mrpc + "#---\n" + base)
    put("experiment", "phase1_smoke", read(ex, "phase1_cpu_smoke.toml").decode().replace('"phase1.toml"', '"b.toml"') +
        "#---\n" + read(ex, "phase1.toml").decode() + "#---\n#---\nrun.seed=7\ntrain.max_steps=50\n")
    put("experiment", "extends_list", 'extends = ["b.toml", "c.toml"]\n[run]\nname = "x"\n#---\n[run]\nseed = 1\n'
        'threads = 2\n#---\n[run]\nseed = 5\n[train]\nmax_steps = 3\n#---\nrun.seed=9\n')
    put("experiment", "cycle", 'extends = "b.toml"\n[run]\nname = "a"\n#---\nextends = "a.toml"\n')

    # safetensors: the golden heads (small), a hand-made file with metadata and every dtype
    put("safetensors", "cls_head", read(SHARED, "model", "cls_head.safetensors"))
    put("safetensors", "qa_head", read(SHARED, "model", "qa_head.safetensors"))
    put("safetensors", "dtypes", safetensors({
        "a": ("F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4)), "b": ("I64", [1], struct.pack("<q", -1)),
        "c": ("BF16", [2], b"\x80\x3f\x00\x40"), "d": ("BOOL", [3], b"\x01\x00\x01"), "e": ("F16", [0], b""),
        "f": ("U8", [], b"\x07")}, {"format": "pt"}))

    # config.json: the golden tiny model's
    put("hf_config", "golden", read(SHARED, "model", "config.json"))

    # vocab.txt: the golden vocab's first 400 lines and its ## pieces, then text to tokenize
    lines = read(SHARED, "tokenizer", "vocab.txt").decode().splitlines()
    pieces = [l for l in lines if l.startswith("##")][:150]
    words = [l for l in lines[1000:] if l.isalpha()][:250]
    put("vocab", "golden_cut", "\n".join(lines[:110] + words + pieces) + "\n#---\nThe quick brown fox, unaffable naïve 日本語!\n")
    put("vocab", "crlf_dup", "[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\nThe\r\nthe\r\nthe\r\n##s\r\n")

    # SQuAD: first byte = options (bit 0 training, bit 1 v2.0, upper bits window sizes)
    put("squad", "v11_train", b"\x51" + read(ex, "squad", "sample-v1.1.json"))
    put("squad", "v20_train", b"\x33" + read(ex, "squad", "sample-v2.0.json"))
    put("squad", "v11_eval", b"\x00" + read(ex, "squad", "sample-v1.1.json"))

    # GLUE: first byte = (task index << 1) | labelled; tasks in glue::tasks() order
    # (cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli)
    put("glue", "mrpc_dev", bytes([2 << 1 | 1]) + read(SHARED, "glue", "MRPC", "dev.tsv"))
    put("glue", "cola", bytes([0 << 1 | 1]) + b"gj04\t1\t\tOur friends won't buy this analysis.\ngj04\t0\t*\tThey drank the pub.\n")
    put("glue", "stsb", bytes([3 << 1 | 1]) + b"index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
        b"0\tmain\tx\t2012\t1\tnone\tnone\tA plane is taking off.\tAn air plane is taking off.\t5.000\n")
    put("glue", "mnli_test", bytes([5 << 1 | 0]) + b"index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\t"
        b"sentence2_binary_parse\tsentence1_parse\tsentence2_parse\tsentence1\tsentence2\n0\t1\t2\tg\ta\tb\tc\td\tHi there.\tHello.\n")
    put("glue", "pairs", bytes([9 << 1 | 1]) + b"\n".join(read(ex, "data", "tiny_pairs", "dev.tsv").split(b"\n")[:20]) + b"\n")

    # Wikipedia dump: the unit tests' page layout, plain and bzip2
    def page(title, ns, text, redirect=False):
        return (f"  <page>\n    <title>{title}</title>\n    <ns>{ns}</ns>\n    <id>1</id>\n" +
                ('    <redirect title="Elsewhere" />\n' if redirect else "") +
                f'    <revision>\n      <id>2</id>\n      <text bytes="10" xml:space="preserve">{text}</text>\n'
                "    </revision>\n  </page>\n")
    dump = ('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10" xml:lang="en">\n  <siteinfo>\n'
            "    <sitename>Wikipedia</sitename>\n  </siteinfo>\n" +
            page("Anarchism", 0, "'''Anarchism''' is a [[political philosophy|philosophy]].{{Infobox|a={{b}}}}&lt;ref&gt;x&lt;/ref&gt;\n"
                 "== History ==\n* list\n{| class=wikitable\n|a\n|}\n[[Category:X]] &amp;nbsp; &#8212; [http://x.org site]") +
            page("Talk:X", 1, "talk") + page("Redir", 0, "#REDIRECT [[A]]", True) + "</mediawiki>\n")
    put("wiki_dump", "plain", dump)
    put("wiki_dump", "bz2", bz2.compress(dump.encode(), 9))

    # bertx serve's v2 inference requests: flat INT64 and nested INT32 data, all three inputs, an output named
    t = lambda name, shape, data, dt="INT64": {"name": name, "shape": shape, "datatype": dt, "data": data}
    put("infer_request", "flat", json.dumps({"id": "a", "inputs": [t("input_ids", [1, 4], [2, 5, 7, 3])]}))
    put("infer_request", "nested", json.dumps({"inputs": [t("input_ids", [2, 3], [[2, 9, 3], [2, 8, 3]], "INT32"),
                                                          t("attention_mask", [2, 3], [[1, 1, 1], [1, 1, 0]]),
                                                          t("token_type_ids", [2, 3], [0, 0, 1, 0, 1, 1])],
                                               "outputs": [{"name": "end_logits"}]}))
    # The binary tensor extension as tritonclient sends it: "#<json bytes>\n" (fuzz_infer_request.cpp's framing of
    # the Inference-Header-Content-Length header), the JSON, then the INT64 ids and INT32 mask little-endian.
    head = json.dumps({"inputs": [{"name": "input_ids", "datatype": "INT64", "shape": [1, 3],
                                   "parameters": {"binary_data_size": 24}},
                                  {"name": "attention_mask", "datatype": "INT32", "shape": [1, 3],
                                   "parameters": {"binary_data_size": 12}}],
                       "parameters": {"binary_data_output": True}}).encode()
    put("infer_request", "binary", b"#%d\n" % len(head) + head + struct.pack("<3q3i", 2, 9, 3, 1, 1, 1))
    # progress.json as bertx writes it
    put("progress", "written", json.dumps({"magic": "bertx-checkpoint", "format_version": 1, "step": 200, "phase": "phase1",
        "epoch": 0, "reader": {"file": 3, "offset": 128}, "run_id": 1, "loss_scale": 65536.0, "good_steps": 12,
        "skipped_steps": 0, "config_hash": "0123456789abcdef"}, indent=2) + "\n")

    # hdf5_shard: inputs are FuzzedDataProvider descriptions, consumed from the end: per dataset (NVIDIA's
    # order) a flags byte (0x80 absent, 0x40 huge dims, low 2 bits rank), one byte per dimension (0-9), a
    # dtype byte (fuzz_hdf5_shard.cpp's dtype()), a fill byte. A valid static-masking shard (N 3, S 5, P 2)
    # and a dynamic-masking one (no masked_lm_*).
    def shard(specs):
        seq = []
        for flags, dims, dtype, fill in specs:
            seq.append(flags)
            if flags & 0x80:
                continue
            seq += dims + [dtype, fill]
        return bytes(reversed(seq))
    static = [(2, [3, 5], 2, 7), (2, [3, 5], 0, 1), (2, [3, 5], 0, 0), (2, [3, 2], 3, 1), (2, [3, 2], 2, 9), (1, [3], 4, 1)]
    put("hdf5_shard", "static", shard(static))
    put("hdf5_shard", "dynamic", shard(static[:3] + [(0x80, [], 0, 0), (0x80, [], 0, 0), (1, [3], 0, 1)]))
    put("hdf5_shard", "pattern", bytes(range(96)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
