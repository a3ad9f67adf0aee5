"""Generate the hostile-file corpus: crafted safetensors and GGUF files, one per class.

Usage: python tests/corpus/make_corpus.py OUTDIR

Every file starts from a real writer's output (``torch_grit.save`` for
safetensors, ``gguf.GGUFWriter`` for GGUF) and is then edited: the header
JSON rewritten, or bytes patched at offsets found by walking the real file.
Nothing binary is committed; the tests call ``generate(tmp_path)``.

``generate`` returns, and writes as ``OUTDIR/manifest.json``, a list of
``{"file", "kind", "class", "scan_exit"}``: ``kind`` is ``safetensors`` or
``gguf``; ``scan_exit`` the graded exit code ``torch-grit scan`` must give
(4: the header does not parse; 1: the header parses but a structural rule
is broken, e.g. a tensor's bytes lie past the end of the file).
"""

import json
import os
import struct
import sys

import numpy as np

UNPARSEABLE, WARNING, VIOLATION, CLEAN = 4, 3, 1, 0


# -- safetensors -----------------------------------------------------------------------------

def _st_base(folder):
    import torch
    from torch import nn

    import torch_grit

    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(64, 32), nn.Linear(32, 16))
    torch_grit.quantize_(m, "MXFP4")
    path = os.path.join(folder, ".base.safetensors")
    torch_grit.save(m, path)
    with open(path, "rb") as f:
        blob = f.read()
    os.unlink(path)
    (n,) = struct.unpack("<Q", blob[:8])
    return blob, n


def _st_file(header_bytes, data, pad=True):
    if pad:
        header_bytes += b" " * (-len(header_bytes) % 8)
    return struct.pack("<Q", len(header_bytes)) + header_bytes + data


def _st_cases(folder):
    blob, n = _st_base(folder)
    raw = blob[8:8 + n]
    data = blob[8 + n:]
    header = json.loads(raw)
    meta = header["__metadata__"]
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    first = sorted(tensors, key=lambda k: tensors[k]["data_offsets"][0])
    u8 = [k for k in first if tensors[k]["dtype"] == "U8"]

    def dump(h):
        return json.dumps(h).encode()

    def edited(fn):
        h = json.loads(raw)
        fn(h)
        return _st_file(dump(h), data)

    cases = {}
    for k in range(8):
        cases["st_len_%d_bytes" % k] = blob[:k]
    cases["st_header_len_u64max"] = struct.pack("<Q", 2 ** 64 - 1) + blob[8:]
    cases["st_header_len_past_eof"] = struct.pack("<Q", len(blob)) + blob[8:]
    cases["st_header_len_over_100mb"] = struct.pack("<Q", 100_000_001) + blob[8:]
    cases["st_header_len_zero"] = struct.pack("<Q", 0) + blob[8:]
    cases["st_header_not_json"] = _st_file(b"{this is not json" + b" " * 7, data)
    cases["st_header_json_array"] = _st_file(b"[" + raw[1:-1].rstrip() + b"]", data)
    cases["st_header_not_utf8"] = _st_file(b'{"\xff\xfe": 1}', data)
    cases["st_header_bad_utf8_in_name"] = blob[:8] + raw.replace(b'"0.bias"', b'"0.\xc3\x28ias"') + data
    cases["st_header_deep_nesting"] = _st_file(b'{"a":' + b"[" * 100000 + b"]" * 100000 + b"}", data)
    dup = raw.rstrip()[:-1] + b', "0.bias": ' + dump(tensors["0.bias"]) + b"}"
    cases["st_duplicate_tensor_key"] = _st_file(dup, data)
    m = dump(meta)
    cases["st_duplicate_metadata_key"] = _st_file(
        dump({k: v for k, v in header.items() if k != "__metadata__"})[:-1]
        + b', "__metadata__": ' + m[:-1] + b', "format": "pt"}}', data)
    cases["st_metadata_not_object"] = edited(lambda h: h.__setitem__("__metadata__", ["x"]))
    cases["st_metadata_int_value"] = edited(lambda h: h["__metadata__"].__setitem__("format", 1))
    cases["st_metadata_nested_value"] = edited(lambda h: h["__metadata__"].__setitem__("torch_grit", {"a": 1}))
    cases["st_grit_descriptors_missing"] = edited(lambda h: h["__metadata__"].pop("__grit__"))
    cases["st_torch_grit_records_missing"] = edited(lambda h: h["__metadata__"].pop("torch_grit"))
    cases["st_grit_descriptors_not_json"] = edited(lambda h: h["__metadata__"].__setitem__("__grit__", "{not json"))
    cases["st_grit_descriptor_missing_one"] = edited(
        lambda h: h["__metadata__"].__setitem__(
            "__grit__", json.dumps({k: v for k, v in json.loads(meta["__grit__"]).items() if k != "1.weight"})))
    g = meta["__grit__"]
    one = json.dumps("1.weight") + ":" + json.dumps(json.loads(g)["1.weight"])
    cases["st_grit_descriptor_duplicated"] = edited(
        lambda h: h["__metadata__"].__setitem__("__grit__", g[:-1] + "," + one + "}"))
    cases["st_grit_descriptor_garbage_hex"] = edited(
        lambda h: h["__metadata__"].__setitem__("__grit__", json.dumps({k: "zz" * 8 for k in json.loads(g)})))
    cases["st_entry_not_object"] = edited(lambda h: h.__setitem__("0.bias", [1, 2]))
    cases["st_entry_extra_field"] = edited(lambda h: h["0.bias"].__setitem__("extra", 1))
    cases["st_unknown_dtype"] = edited(lambda h: h["0.bias"].__setitem__("dtype", "F128"))
    cases["st_dtype_not_string"] = edited(lambda h: h["0.bias"].__setitem__("dtype", 7))
    cases["st_dtype_unhashable"] = edited(lambda h: h["0.bias"].__setitem__("dtype", ["F32"]))
    cases["st_negative_shape"] = edited(lambda h: h["0.bias"].__setitem__("shape", [-32]))
    cases["st_float_shape"] = edited(lambda h: h["0.bias"].__setitem__("shape", [32.0]))
    cases["st_bool_shape"] = edited(lambda h: h["0.bias"].__setitem__("shape", [True] * 32))
    cases["st_shape_product_overflow"] = edited(lambda h: h["0.bias"].__setitem__("shape", [2 ** 63, 2 ** 63, 4]))
    cases["st_huge_rank"] = edited(lambda h: h["0.bias"].__setitem__("shape", [2] * 200000))
    cases["st_negative_offset"] = edited(lambda h: h["0.bias"].__setitem__("data_offsets", [-128, 0]))
    cases["st_offsets_reversed"] = edited(lambda h: h["0.bias"].__setitem__("data_offsets", [128, 0]))
    cases["st_offsets_u64_overflow"] = edited(lambda h: h[first[-1]].__setitem__("data_offsets", [2 ** 64 - 16, 2 ** 64]))
    cases["st_offsets_three"] = edited(lambda h: h["0.bias"].__setitem__("data_offsets", [0, 64, 128]))

    def overlap(h):
        a, b = h[u8[0]]["data_offsets"]
        h[u8[0]]["data_offsets"] = [a - 4, b - 4]
    cases["st_offsets_overlap"] = edited(overlap)

    def gap(h):
        a, b = h[u8[0]]["data_offsets"]
        h[u8[0]]["data_offsets"] = [a + 4, b + 4]
    cases["st_offsets_gap"] = edited(gap)
    cases["st_shape_bytes_mismatch"] = edited(lambda h: h["0.bias"].__setitem__("shape", [31]))
    cases["st_trailing_bytes"] = blob + b"\0" * 16
    cases["st_truncated_data"] = blob[:-1]
    cases["st_truncated_header"] = blob[:8 + n // 2]
    cases["st_header_is_padding_only"] = _st_file(b" " * 8, data)
    # header parses, entries fine, but the packed plane shrinks: descriptor vs bytes
    def shrink(h):
        k = u8[0]
        a, b = h[k]["data_offsets"]
        h[k]["shape"] = [b - a - 8]
        h[k]["data_offsets"] = [a, b - 8]
        for j in first[first.index(k) + 1:]:
            c, d = h[j]["data_offsets"]
            h[j]["data_offsets"] = [c - 8, d - 8]
    hk = json.loads(raw)
    shrink(hk)
    a = tensors[u8[0]]["data_offsets"]
    cases["st_plane_shorter_than_descriptor"] = _st_file(dump(hk), data[:a[1] - 8] + data[a[1]:])
    return cases


# -- GGUF ------------------------------------------------------------------------------------

def _gguf_base(folder):
    import gguf

    path = os.path.join(folder, ".base.gguf")
    w = gguf.GGUFWriter(path, "llama")
    w.add_uint32("test.count", 7)
    w.add_string("test.name", "corpus")
    w.add_array("test.ints", [1, 2, 3, 4])
    w.add_array("test.strs", ["a", "bb", "ccc"])
    rng = np.random.default_rng(0)
    w.add_tensor("a.weight", rng.standard_normal((4, 64)).astype(np.float32))
    w.add_tensor("b.weight", rng.standard_normal((8, 32)).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with open(path, "rb") as f:
        blob = f.read()
    os.unlink(path)
    return blob


def _gguf_map(blob):
    """Walk a well-formed GGUF file; return the byte offsets of every field (for patching)."""
    off = 4
    m = {"version": off}
    off += 4
    m["n_tensors"] = off
    n_t = struct.unpack_from("<Q", blob, off)[0]
    off += 8
    m["n_kv"] = off
    n_kv = struct.unpack_from("<Q", blob, off)[0]
    off += 8
    fixed = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def string(off):
        k = struct.unpack_from("<Q", blob, off)[0]
        return off + 8 + k, blob[off + 8:off + 8 + k]

    m["kv"] = []
    for _ in range(n_kv):
        kv = {"start": off}
        off, key = string(off)
        kv["key"] = key.decode()
        kv["type"] = off
        t = struct.unpack_from("<I", blob, off)[0]
        off += 4
        kv["value"] = off
        if t in fixed:
            off += fixed[t]
        elif t == 8:
            off, _ = string(off)
        else:
            inner, cnt = struct.unpack_from("<IQ", blob, off)
            kv["count"] = off + 4
            off += 12
            for _ in range(cnt):
                if inner == 8:
                    off, _ = string(off)
                else:
                    off += fixed[inner]
        kv["end"] = off
        m["kv"].append(kv)
    m["infos"] = []
    for _ in range(n_t):
        ti = {"start": off}
        off, _ = string(off)
        ti["n_dims"] = off
        nd = struct.unpack_from("<I", blob, off)[0]
        off += 4
        ti["dims"] = off
        off += 8 * nd
        ti["type"] = off
        off += 4
        ti["offset"] = off
        off += 8
        ti["end"] = off
        m["infos"].append(ti)
    m["header_end"] = off
    m["data_start"] = off + (-off % 32)
    return m


def _patch(blob, off, fmt, *vals):
    b = bytearray(blob)
    struct.pack_into(fmt, b, off, *vals)
    return bytes(b)


def _gguf_cases(folder):
    blob = _gguf_base(folder)
    m = _gguf_map(blob)
    kv = {k["key"]: k for k in m["kv"]}
    t0, t1 = m["infos"]
    U64MAX = 2 ** 64 - 1

    cases, scan = {}, {}
    cases["gguf_bad_magic"] = b"GGUX" + blob[4:]
    cases["gguf_bad_version_0"] = _patch(blob, m["version"], "<I", 0)
    cases["gguf_bad_version_1"] = _patch(blob, m["version"], "<I", 1)
    cases["gguf_bad_version_huge"] = _patch(blob, m["version"], "<I", 0xFFFFFFFF)
    cases["gguf_huge_n_tensors"] = _patch(blob, m["n_tensors"], "<Q", U64MAX)
    cases["gguf_huge_n_kv"] = _patch(blob, m["n_kv"], "<Q", U64MAX)
    cases["gguf_n_kv_plausible_but_wrong"] = _patch(blob, m["n_kv"], "<Q", len(m["kv"]) + 1)
    cases["gguf_n_tensors_plausible_but_wrong"] = _patch(blob, m["n_tensors"], "<Q", 3)
    cases["gguf_key_length_u64max"] = _patch(blob, m["kv"][0]["start"], "<Q", U64MAX)
    cases["gguf_string_value_length_u64max"] = _patch(blob, kv["test.name"]["value"], "<Q", U64MAX)
    cases["gguf_string_value_length_past_eof"] = _patch(blob, kv["test.name"]["value"], "<Q", len(blob))
    cases["gguf_array_count_u64max"] = _patch(blob, kv["test.ints"]["count"], "<Q", U64MAX)
    cases["gguf_array_count_overflow_bytes"] = _patch(blob, kv["test.ints"]["count"], "<Q", 2 ** 62 + 1)
    cases["gguf_string_array_count_u64max"] = _patch(blob, kv["test.strs"]["count"], "<Q", U64MAX)
    cases["gguf_array_string_length_u64max"] = _patch(blob, kv["test.strs"]["count"] + 8, "<Q", U64MAX)
    cases["gguf_unknown_value_type"] = _patch(blob, kv["test.count"]["type"], "<I", 13)
    cases["gguf_unknown_value_type_huge"] = _patch(blob, kv["test.count"]["type"], "<I", 0xFFFFFFFF)
    cases["gguf_unknown_array_element_type"] = _patch(blob, kv["test.ints"]["value"], "<I", 99)
    cases["gguf_nested_array_type"] = _patch(blob, kv["test.ints"]["value"], "<I", 9)
    # general.alignment: rename test.count (a uint32) to it, same key length is not possible, so
    # rebuild the KV with the key replaced and the counts kept.
    def with_alignment(value, vtype=4):
        k = kv["test.count"]
        key = b"general.alignment"
        body = struct.pack("<Q", len(key)) + key + struct.pack("<I", vtype)
        body += struct.pack("<I", value) if vtype == 4 else struct.pack("<Q", value)
        return blob[:k["start"]] + body + blob[k["end"]:]
    cases["gguf_alignment_zero"] = with_alignment(0)
    cases["gguf_alignment_not_power_of_two"] = with_alignment(48)
    cases["gguf_alignment_wrong_type"] = with_alignment(32, vtype=10)
    cases["gguf_n_dims_5"] = _patch(blob, t0["n_dims"], "<I", 5)
    cases["gguf_n_dims_huge"] = _patch(blob, t0["n_dims"], "<I", 0xFFFFFFFF)
    cases["gguf_n_dims_zero"] = _patch(blob, t0["n_dims"], "<I", 0)
    cases["gguf_tensor_name_length_u64max"] = _patch(blob, t0["start"], "<Q", U64MAX)
    cases["gguf_dimension_zero"] = _patch(blob, t0["dims"], "<Q", 0)
    cases["gguf_dimension_negative"] = _patch(blob, t0["dims"], "<q", -64)
    cases["gguf_dimension_product_overflow"] = _patch(_patch(blob, t0["dims"], "<Q", 2 ** 40),
                                                      t0["dims"] + 8, "<Q", 2 ** 40)
    cases["gguf_unknown_ggml_type"] = _patch(blob, t0["type"], "<I", 200)
    cases["gguf_removed_ggml_type"] = _patch(blob, t0["type"], "<I", 4)   # Q4_2: removed from ggml
    cases["gguf_offset_misaligned"] = _patch(blob, t1["offset"], "<Q", struct.unpack_from("<Q", blob, t1["offset"])[0] + 1)
    cases["gguf_offset_past_eof"] = _patch(blob, t1["offset"], "<Q", len(blob) * 32)
    cases["gguf_offset_u64max_aligned"] = _patch(blob, t1["offset"], "<Q", 2 ** 64 - 32)
    cases["gguf_offsets_overlap"] = _patch(blob, t1["offset"], "<Q", 0)
    cases["gguf_duplicate_tensor_name"] = blob[:t1["start"]] + blob[t0["start"]:t0["n_dims"]] + blob[t1["n_dims"]:]
    # the duplicate name changes the header length; it is then parsed or refused, never crashes
    # truncation at every region
    regions = {
        "magic": 2, "version": m["version"] + 2, "n_tensors": m["n_tensors"] + 4, "n_kv": m["n_kv"] + 4,
        "kv_key": m["kv"][0]["start"] + 10, "kv_type": m["kv"][0]["type"] + 2,
        "kv_value": kv["test.name"]["value"] + 9, "kv_array": kv["test.strs"]["count"] + 12,
        "tensor_info_name": t0["start"] + 9, "tensor_info_dims": t0["dims"] + 4,
        "tensor_info_type": t0["type"] + 2, "tensor_info_offset": t1["offset"] + 4,
        "padding": m["header_end"] + 1 if m["data_start"] > m["header_end"] + 1 else None,
        "data": m["data_start"] + 100, "data_last_byte": len(blob) - 1,
    }
    for region, cut in regions.items():
        if cut is not None:
            cases["gguf_truncated_in_%s" % region] = blob[:cut]
    cases["gguf_empty"] = b""
    cases["gguf_magic_only"] = b"GGUF"
    # header parses, tensor data does not fit: a structural violation, not unparseable
    for name in ("gguf_truncated_in_data", "gguf_truncated_in_data_last_byte", "gguf_offset_past_eof",
                 "gguf_offset_u64max_aligned", "gguf_truncated_in_padding",
                 # the walk reads the data bytes as a third tensor info: truncated / unknown type
                 "gguf_n_tensors_plausible_but_wrong"):
        scan[name] = VIOLATION
    scan["gguf_dimension_zero"] = CLEAN            # ggml allows empty tensors (ne >= 0)
    scan["gguf_unknown_ggml_type"] = WARNING       # unknown_ggml_type: a type the scan cannot judge
    scan["gguf_removed_ggml_type"] = WARNING
    return cases, scan


def generate(folder):
    folder = str(folder)
    os.makedirs(folder, exist_ok=True)
    manifest = []
    st = _st_cases(folder)
    # The header parses for these; what scan reports is then a finding, not "unparseable".
    # CLEAN marks what the scan accepts by design: stock safetensors ignores unknown entry
    # fields, and without a (or with a repeated, identical) __grit__ descriptor the U8 planes
    # are plain U8 tensors to the scan; torch_grit.load refuses all of them.
    st_scan = {"st_trailing_bytes": WARNING, "st_shape_bytes_mismatch": VIOLATION,
               "st_truncated_data": VIOLATION, "st_plane_shorter_than_descriptor": VIOLATION,
               "st_shape_product_overflow": VIOLATION,
               "st_grit_descriptors_missing": CLEAN, "st_grit_descriptor_missing_one": CLEAN,
               "st_grit_descriptors_not_json": VIOLATION, "st_grit_descriptor_duplicated": CLEAN,
               "st_grit_descriptor_garbage_hex": VIOLATION, "st_torch_grit_records_missing": VIOLATION,
               "st_entry_extra_field": CLEAN}
    for name, data in st.items():
        manifest.append({"file": name + ".safetensors", "kind": "safetensors", "class": name,
                         "scan_exit": st_scan.get(name, UNPARSEABLE)})
        with open(os.path.join(folder, name + ".safetensors"), "wb") as f:
            f.write(data)
    gg, gg_scan = _gguf_cases(folder)
    for name, data in gg.items():
        manifest.append({"file": name + ".gguf", "kind": "gguf", "class": name,
                         "scan_exit": gg_scan.get(name, UNPARSEABLE)})
        with open(os.path.join(folder, name + ".gguf"), "wb") as f:
            f.write(data)
    with open(os.path.join(folder, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return manifest


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_corpus.py OUTDIR")
    print("%d files written to %s" % (len(generate(sys.argv[1])), sys.argv[1]))
