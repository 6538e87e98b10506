"""Checks a run directory's TensorBoard event file against the run's own
records, decoding it with Debian's python3-protobuf:

  check_tfevents.py RUN_DIR GRID_W GRID_H
  check_tfevents.py --framing RUN_DIR     only the framing (a file cut short by a
                                          full disk): prints the record count

- TFRecord framing: every length and data CRC (masked CRC-32C) is right;
- the first event is the file version "brain.Event:2";
- every figure of every metrics.jsonl line is a scalar event of the same
  tag and step, equal to float32 precision;
- every edge has its depth and stalls scalars;
- every sample grid written (samples/step-*.png) is an image event of its
  step holding the same PNG bytes, GRID_W x GRID_H pixels;
- the pipeline script and the arguments are text events.

The messages are defined here (the fields TensorBoard reads of
tensorflow/core/util/event.proto and framework/summary.proto, tensor.proto),
so no TensorFlow is needed. Prints what it checked; exits 1 on a mismatch.
"""
import glob
import json
import math
import os
import struct
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto


def messages():
    fdp = descriptor_pb2.FileDescriptorProto(name="gf_tb_test.proto", package="gftb", syntax="proto3")

    def add(name, fields):
        m = fdp.message_type.add(name=name)
        for fname, num, ftype, type_name, repeated in fields:
            f = m.field.add(name=fname, number=num, type=ftype,
                            label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
            if type_name:
                f.type_name = ".gftb." + type_name

    add("PluginData", [("plugin_name", 1, F.TYPE_STRING, None, False), ("content", 2, F.TYPE_BYTES, None, False)])
    add("SummaryMetadata", [("plugin_data", 1, F.TYPE_MESSAGE, "PluginData", False)])
    add("TensorShapeProto", [])
    add("TensorProto", [("dtype", 1, F.TYPE_INT32, None, False),
                        ("tensor_shape", 2, F.TYPE_MESSAGE, "TensorShapeProto", False),
                        ("string_val", 8, F.TYPE_BYTES, None, True)])
    add("Image", [("height", 1, F.TYPE_INT32, None, False), ("width", 2, F.TYPE_INT32, None, False),
                  ("colorspace", 3, F.TYPE_INT32, None, False),
                  ("encoded_image_string", 4, F.TYPE_BYTES, None, False)])
    add("Value", [("tag", 1, F.TYPE_STRING, None, False), ("simple_value", 2, F.TYPE_FLOAT, None, False),
                  ("image", 4, F.TYPE_MESSAGE, "Image", False), ("tensor", 8, F.TYPE_MESSAGE, "TensorProto", False),
                  ("metadata", 9, F.TYPE_MESSAGE, "SummaryMetadata", False)])
    add("Summary", [("value", 1, F.TYPE_MESSAGE, "Value", True)])
    add("Event", [("wall_time", 1, F.TYPE_DOUBLE, None, False), ("step", 2, F.TYPE_INT64, None, False),
                  ("file_version", 3, F.TYPE_STRING, None, False),
                  ("summary", 5, F.TYPE_MESSAGE, "Summary", False)])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.MessageFactory(pool).GetPrototype(pool.FindMessageTypeByName("gftb.Event"))


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


fails = 0


def check(ok, what):
    global fails
    if not ok:
        print("FAIL:", what)
        fails += 1


def main():
    framing = sys.argv[1] == "--framing"
    if framing:
        run, gw, gh = sys.argv[2], 0, 0
    else:
        run, gw, gh = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    files = glob.glob(os.path.join(run, "events.out.tfevents.*"))
    check(len(files) == 1, "one event file in %s, found %s" % (run, files))
    if not files:
        return 1
    Event = messages()
    raw = open(files[0], "rb").read()
    events, off = [], 0
    while off + 12 <= len(raw):
        n, lcrc = struct.unpack_from("<QI", raw, off)
        check(masked(crc32c(raw[off:off + 8])) == lcrc, "length CRC of the record at offset %d" % off)
        data = raw[off + 12:off + 12 + n]
        if off + 12 + n + 4 > len(raw):
            break
        (dcrc,) = struct.unpack_from("<I", raw, off + 12 + n)
        check(len(data) == n and masked(crc32c(data)) == dcrc, "data CRC of the record at offset %d" % off)
        e = Event()
        e.ParseFromString(data)
        events.append(e)
        off += 12 + n + 4
    check(off == len(raw), "the file ends inside a record")
    check(events and events[0].file_version == "brain.Event:2", "first event is the file version")
    if framing:
        print("check_tfevents: %d records to the end of %s (%d bytes), CRCs good" % (len(events), files[0], len(raw)))
        return 1 if fails else 0

    scalars, images, texts = {}, {}, {}
    for e in events[1:]:
        check(len(e.summary.value) == 1, "one value per event")
        for v in e.summary.value:
            if v.HasField("image"):
                images[e.step] = v.image
            elif v.HasField("tensor"):
                check(v.metadata.plugin_data.plugin_name == "text" and v.tensor.dtype == 7, "text event " + v.tag)
                texts[v.tag] = v.tensor.string_val[0].decode()
            else:
                scalars[(v.tag, e.step)] = v.simple_value

    nfig = nedge = 0
    for line in open(os.path.join(run, "metrics.jsonl")):
        rec = json.loads(line)
        step = rec["step"]
        for k, v in rec.items():
            if k in ("step", "time", "sources", "edges", "workers") or v is None:
                continue
            got = scalars.get((k, step))
            # the event holds float32(x), the line x printed to 9 digits
            check(got is not None and abs(got - v) <= 1e-6 * max(1.0, abs(v)),
                  "scalar %s at step %d: metrics.jsonl %r, event %r" % (k, step, v, got))
            nfig += 1
        for edge in rec.get("edges", []):
            for what in ("depth", "stalls"):
                tag = "edges/%s -> %s/%s" % (edge["from"], edge["to"], what)
                check(scalars.get((tag, step)) == edge[what], "%s at step %d" % (tag, step))
                nedge += 1
        for w in rec.get("workers", []):
            tag = "workers/%s" % w["stage"]
            check(scalars.get((tag, step)) == w["workers"], "%s at step %d" % (tag, step))
    check(nfig > 0 and nedge > 0, "figures and edges were checked")

    grids = sorted(glob.glob(os.path.join(run, "samples", "step-*.png")))
    for g in grids:
        step = int(os.path.basename(g)[5:-4])
        im = images.get(step)
        check(im is not None, "image event of step %d" % step)
        if im is None:
            continue
        png = im.encoded_image_string
        check(png == open(g, "rb").read(), "image of step %d holds %s" % (step, g))
        w, h = struct.unpack(">II", png[16:24])
        check(png[:8] == b"\x89PNG\r\n\x1a\n" and (w, h) == (gw, gh) and (im.width, im.height) == (gw, gh),
              "image of step %d is a %dx%d PNG (%dx%d, header %dx%d)" % (step, gw, gh, w, h, im.width, im.height))
    check(len(grids) > 0 and len(images) == len(grids), "%d grids, %d image events" % (len(grids), len(images)))
    check("gf.run" in texts.get("pipeline", ""), "the pipeline script as text")
    check("steps=" in texts.get("arguments", ""), "the arguments as text: %r" % texts.get("arguments"))
    print("check_tfevents: %d records, CRCs good; %d figures and %d edge values equal metrics.jsonl; "
          "%d grids; texts %s" % (len(events), nfig, nedge, len(grids), sorted(texts)))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
