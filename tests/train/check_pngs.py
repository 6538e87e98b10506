#!/usr/bin/env python3
"""Checks the PNG files `ganflow sample out=DIR/` writes (for test_train.sh
sample_folder), decoding them with zlib alone (no PIL):

    check_pngs.py DIR W H C [GRID.png COLS N]

Every DIR/<folder>/*.png must decode to W x H pixels of C channels; prints
"<folder> <count>" per folder, sorted. With GRID.png (the grid `ganflow
sample` wrote with the same seed, COLS columns, 2-pixel padding), the first N
files (by number) must equal the grid's tiles byte for byte.
"""
import os
import struct
import sys
import zlib


def decode(path):
    raw = open(path, "rb").read()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: not a PNG"
    i, idat, ihdr = 8, b"", None
    while i < len(raw):
        n, kind = struct.unpack(">I4s", raw[i:i + 8])
        body = raw[i + 8:i + 8 + n]
        assert zlib.crc32(kind + body) == struct.unpack(">I", raw[i + 8 + n:i + 12 + n])[0], f"{path}: bad CRC"
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        i += 12 + n
    w, h, depth, ctype = ihdr[:4]
    assert depth == 8 and ctype in (0, 2), f"{path}: depth {depth} colour type {ctype}"
    c = 1 if ctype == 0 else 3
    data, stride, rows, prev = zlib.decompress(idat), w * c, [], bytearray(w * c)
    assert len(data) == h * (stride + 1), f"{path}: {len(data)} bytes of image data for {w}x{h}x{c}"
    for y in range(h):
        f, line = data[y * (stride + 1)], bytearray(data[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - c] if x >= c else 0
            b, d = prev[x], prev[x - c] if x >= c else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - d
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - d)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else d)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, c, rows


def main():
    top, w, h, c = sys.argv[1], *map(int, sys.argv[2:5])
    files = {}
    for folder in sorted(os.listdir(top)):
        names = sorted(os.listdir(os.path.join(top, folder)))
        print(folder, len(names))
        for name in names:
            got = decode(os.path.join(top, folder, name))
            assert got[:3] == (w, h, c), f"{folder}/{name}: {got[:3]}, expected {(w, h, c)}"
            files[int(name.split(".")[0])] = got[3]
    assert sorted(files) == list(range(len(files))), "file numbers are not 0..n-1"
    if len(sys.argv) > 5:
        gw, gh, gc, grid = decode(sys.argv[5])
        cols, n = int(sys.argv[6]), int(sys.argv[7])
        for i in range(n):
            x0, y0 = 2 + (i % cols) * (w + 2), 2 + (i // cols) * (h + 2)
            tile = [grid[y0 + y][x0 * c:(x0 + w) * c] for y in range(h)]
            assert tile == files[i], f"image {i} differs from tile {i} of the grid"
        print(f"first {n} images equal the grid's tiles")


if __name__ == "__main__":
    main()
