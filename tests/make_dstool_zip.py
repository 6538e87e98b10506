#!/usr/bin/env python3
"""Writes datasets in the layout of StyleGAN2-ADA's / R3GAN's dataset_tool.py
(PNG images in numbered folders, dataset.json of labels) for
tests/test_dstool.c, with the standard library's zipfile and PNGs from
Debian's python3-pil and numpy.

    make_dstool_zip.py OUT

Image i is PNG `%05d/img%08d.png % (i // 16, i)`, W x H, pixel
(y, x, c) = px(i, y, x, c) below, label (7 i) % 5. Written into OUT:

  labelled.zip    N RGB images (the ints of dataset.json), members written
                  in a shuffled order, even i stored and odd i deflated,
                  folder entries for the sub-folders and a README.txt
  labelled/       the same files unpacked (the folder form)
  nested.zip      the same files under a top folder cifar/ (`zip -r` of the
                  folder form)
  zip64.zip       the same images and dataset.json, every size and offset
                  in zip64 extra fields and a zip64 end record, written by
                  hand below (Python writes those only past 65,535 members
                  or 4 GiB); zipfile reads it back before it is kept
  unlabelled.zip  8 gray 6 x 5 images, {"labels": null}
  bad-*.zip       one fault each (test_dstool.c names them): a member
                  without its label, a label of a missing member, a label
                  out of range, a vector label, a duplicate label, an image
                  of another size, a corrupt member (a data byte flipped,
                  so its CRC-32 fails), a bad dataset.json

Exit 77 when PIL or numpy is missing.
"""
import io
import json
import os
import random
import struct
import sys
import zipfile
import zlib

try:
    import numpy as np
    from PIL import Image
except ImportError as e:
    print(f"skip: {e} (install python3-pil and python3-numpy: scripts/deps)")
    sys.exit(77)

N, W, H = 40, 12, 10


def px(i, y, x, c):
    return (i * 37 + y * 11 + x * 5 + c * 71) & 255


def name(i):
    return f"{i // 16:05d}/img{i:08d}.png"


def png(i, w=W, h=H, gray=False):
    a = np.fromfunction(lambda y, x, c: (i * 37 + y * 11 + x * 5 + c * 71) % 256, (h, w, 1 if gray else 3),
                        dtype=np.int64).astype(np.uint8)
    img = Image.fromarray(a[:, :, 0], "L") if gray else Image.fromarray(a, "RGB")
    b = io.BytesIO()
    img.save(b, format="png")
    return b.getvalue()


def labels_json(n):
    return json.dumps({"labels": [[name(i), (7 * i) % 5] for i in range(n)]})


def write_zip(path, members, deflate_odd=True):
    """members: list of (name, bytes); name ending in '/' is a folder entry."""
    with zipfile.ZipFile(path, "w") as z:
        for k, (n, data) in enumerate(members):
            method = zipfile.ZIP_DEFLATED if deflate_odd and k % 2 else zipfile.ZIP_STORED
            z.writestr(zipfile.ZipInfo(n, (2020, 1, 1, 0, 0, 0)), data, compress_type=method)


def write_zip64(path, members):
    """Stored members, every central entry with sizes and offset in a zip64
    extra field, and a zip64 end record and locator before the end record."""
    out = bytearray()
    central = bytearray()
    for n, data in members:
        nb = n.encode()
        crc = zlib.crc32(data)
        off = len(out)
        local_extra = struct.pack("<HHQQ", 1, 16, len(data), len(data))
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, 0, 0, 0x21, crc, 0xFFFFFFFF, 0xFFFFFFFF, len(nb),
                           len(local_extra)) + nb + local_extra + data
        extra = struct.pack("<HHQQQ", 1, 24, len(data), len(data), off)
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 0, 0, 0, 0x21, crc, 0xFFFFFFFF,
                               0xFFFFFFFF, len(nb), len(extra), 0, 0, 0, 0, 0xFFFFFFFF) + nb + extra
    cd_off = len(out)
    out += central
    end64 = len(out)
    out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, len(members), len(members), len(central), cd_off)
    out += struct.pack("<IIQI", 0x07064B50, 0, end64, 1)
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    with open(path, "wb") as f:
        f.write(out)
    with zipfile.ZipFile(path) as z:  # the reference reader agrees
        assert z.testzip() is None
        assert [i.filename for i in z.infolist()] == [n for n, _ in members]
        for n, data in members:
            assert z.read(n) == data


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    imgs = [(name(i), png(i)) for i in range(N)]
    order = list(range(N))
    random.Random(5).shuffle(order)
    members = [("dataset.json", labels_json(N).encode())]
    members += [(f"{k:05d}/", b"") for k in range((N + 15) // 16)]
    members += [imgs[i] for i in order]
    members.insert(7, ("README.txt", b"made by tests/make_dstool_zip.py\n"))
    write_zip(os.path.join(out, "labelled.zip"), members)
    for n, data in members:
        p = os.path.join(out, "labelled", n)
        if n.endswith("/"):
            os.makedirs(p, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "wb") as f:
                f.write(data)
    write_zip64(os.path.join(out, "zip64.zip"), [m for m in members if not m[0].endswith("/")])
    write_zip(os.path.join(out, "nested.zip"), [("cifar/" + n, data) for n, data in members])

    gray = [(name(i), png(i, 6, 5, gray=True)) for i in range(8)]
    write_zip(os.path.join(out, "unlabelled.zip"), [("dataset.json", b'{"labels": null}')] + gray)

    small = imgs[:6]
    good = json.loads(labels_json(6))["labels"]

    def bad(tag, labels=None, files=None, raw_json=None):
        js = raw_json if raw_json is not None else json.dumps({"labels": labels if labels is not None else good})
        write_zip(os.path.join(out, f"bad-{tag}.zip"), [("dataset.json", js.encode())] + (files or small),
                  deflate_odd=False)

    bad("nolabel", labels=good[:3] + good[4:])                          # 00000/img00000003.png
    bad("extralabel", labels=good + [["00000/img00000099.png", 1]])
    bad("range", labels=good[:2] + [[good[2][0], -1]] + good[3:])     # 00000/img00000002.png
    bad("vector", labels=good[:4] + [[good[4][0], [0.5, 1]]] + good[5:])  # 00000/img00000004.png
    bad("twice", labels=good + [good[1]])                              # 00000/img00000001.png
    bad("size", files=small[:5] + [(name(5), png(5, W + 1, H))])       # 00000/img00000005.png
    bad("json", raw_json='{"labels": [["00000/img00000000.png", 1],]}')
    bad("nokey", raw_json='{"classes": 3}')
    bad("corrupt")
    p = os.path.join(out, "bad-corrupt.zip")
    with zipfile.ZipFile(p) as z:
        info = z.getinfo(name(2))
    with open(p, "r+b") as f:  # a byte in the middle of 00000/img00000002.png's data
        f.seek(info.header_offset + 30 + len(info.filename) + len(info.extra) + info.compress_size // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x5A]))


if __name__ == "__main__":
    main()
