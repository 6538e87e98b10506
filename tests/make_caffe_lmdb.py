#!/usr/bin/env python3
"""Writes a Caffe-style LMDB (as convert_imageset does: one LMDB
environment, keys of the tool's own naming, caffe.Datum values) for
tests/test_caffe.c, with Debian's python3-lmdb and python3-protobuf (the
Datum message is declared here, field for field as in caffe.proto).

    make_caffe_lmdb.py OUT JPEG_DIR N

Record i (0 <= i < N), label i % 4:
  i % 3 == 0  raw gray Datum, 10 x 12, pixel (y, x) = px(i, y, x, 0)
  i % 3 == 1  raw colour Datum, 9 x 11, planes B, G, R of the RGB image
              px(i, y, x, c) (c = 0 red), as OpenCV images are stored
  i % 3 == 2  encoded Datum: the bytes of JPEG_DIR/img-<i>.jpg
Keys are "%08d_<kind>_<i>" with the number (7 i) mod N, so LMDB's key order
is not the record order. One more value, key "%08d_corrupt" % (N // 2), is a
Datum cut inside its data field. OUT/manifest.txt lists the records in the
LMDB's key order (read back with a cursor): "position i kind label".
Exit 77 when python3-lmdb or python3-protobuf is missing.
"""
import os
import sys

try:
    import lmdb
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
except ImportError as e:
    print(f"skip: {e} (install python3-lmdb and python3-protobuf: scripts/deps)")
    sys.exit(77)


def datum_class():
    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="gf_caffe_test.proto", package="caffe", syntax="proto2")
    m = fdp.message_type.add(name="Datum")
    for name, num, typ, label in [("channels", 1, F.TYPE_INT32, F.LABEL_OPTIONAL),
                                  ("height", 2, F.TYPE_INT32, F.LABEL_OPTIONAL),
                                  ("width", 3, F.TYPE_INT32, F.LABEL_OPTIONAL),
                                  ("data", 4, F.TYPE_BYTES, F.LABEL_OPTIONAL),
                                  ("label", 5, F.TYPE_INT32, F.LABEL_OPTIONAL),
                                  ("float_data", 6, F.TYPE_FLOAT, F.LABEL_REPEATED),
                                  ("encoded", 7, F.TYPE_BOOL, F.LABEL_OPTIONAL)]:
        m.field.add(name=name, number=num, type=typ, label=label)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.MessageFactory(pool).GetPrototype(pool.FindMessageTypeByName("caffe.Datum"))


def px(i, y, x, c):
    return (i * 37 + y * 11 + x * 5 + c * 71) & 255


def main():
    out, jdir, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    Datum = datum_class()
    os.makedirs(out, exist_ok=True)
    env = lmdb.open(out, map_size=1 << 26, subdir=True)
    kinds = ["gray", "bgr", "jpeg"]
    with env.begin(write=True) as txn:
        for i in range(n):
            d = Datum()
            kind = kinds[i % 3]
            d.label = i % 4
            if kind == "gray":
                d.channels, d.height, d.width = 1, 10, 12
                d.data = bytes(px(i, y, x, 0) for y in range(10) for x in range(12))
            elif kind == "bgr":
                d.channels, d.height, d.width = 3, 9, 11
                d.data = bytes(px(i, y, x, c) for c in (2, 1, 0) for y in range(9) for x in range(11))
            else:
                with open(os.path.join(jdir, f"img-{i}.jpg"), "rb") as f:
                    d.data = f.read()
                d.encoded = True
            key = f"{(7 * i) % n:08d}_{kind}_{i}".encode()
            assert txn.put(key, d.SerializeToString(), overwrite=False)
        bad = Datum(channels=1, height=10, width=12, data=bytes(120), label=1).SerializeToString()
        txn.put(f"{n // 2:08d}_corrupt".encode(), bad[:len(bad) - 40])
    with env.begin() as txn, open(os.path.join(out, "manifest.txt"), "w") as f:
        for pos, (k, v) in enumerate(txn.cursor()):
            parts = k.decode().split("_")
            if parts[1] == "corrupt":
                f.write(f"{pos} -1 corrupt -1\n")
            else:
                i = int(parts[2])
                f.write(f"{pos} {i} {parts[1]} {Datum.FromString(v).label}\n")
    env.close()


if __name__ == "__main__":
    main()
