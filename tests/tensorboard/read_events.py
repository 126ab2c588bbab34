#!/usr/bin/env python3
"""Reads Loom's TensorBoard event files with TensorBoard's own EventAccumulator.

    read_events.py --driver build/cpu/tensorboard_driver --workdir build/cpu/tensorboard_reader

Runs the driver (tests/tensorboard/tensorboard_driver.cpp), then checks every scalar
(value and step), the add_scalars runs, the text and both histograms (min, max, num,
sum, sum_squares and the buckets PyTorch's add_histogram would write) as TensorBoard
reads them, and that a copy of the file cut in the middle of a record reads every record
before the cut.

TensorBoard comes from the virtual environment scripts/install-deps.sh makes
(.venv-tools/ at the repository root). Without it this test fails under CI (the
environment variable CI is set) and is skipped (exit 77) elsewhere.
"""
import glob
import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tools_venv import check, finish, start  # noqa: E402

TEXT = "lr = 0.1, hidden = **128**\nsecond line: üñí"


def f32(x):
    """What a float32 simple_value holds, as a Python float."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def accumulator(path):
    from tensorboard.backend.event_processing import event_accumulator as ea
    # 0: keep every event (the defaults keep one histogram and ten tensors per tag).
    acc = ea.EventAccumulator(path, size_guidance={ea.SCALARS: 0, ea.HISTOGRAMS: 0, ea.TENSORS: 0,
                                                   ea.COMPRESSED_HISTOGRAMS: 0})
    acc.Reload()
    return acc


def expected_histogram(values):
    """PyTorch's add_histogram(bins="tensorflow") on float64 values, with numpy."""
    import numpy as np
    v, buckets, neg = 1e-12, [], []
    while v < 1e20:
        buckets.append(v)
        neg.append(-v)
        v *= 1.1
    edges = neg[::-1] + [0] + buckets
    values = np.asarray(values, dtype=np.float64)
    counts, limits = np.histogram(values, bins=edges)
    nonzero = np.nonzero(counts)[0]
    start, end = int(nonzero[0]), int(nonzero[-1]) + 1
    counts = counts[start - 1:end] if start > 0 else np.concatenate([[0], counts[:end]])
    limits = limits[start:end + 1]
    return dict(min=values.min(), max=values.max(), num=len(values), sum=values.sum(),
                sum_squares=values.dot(values), bucket_limit=limits.tolist(), bucket=counts.tolist())


def check_scalars(acc, tag, want, where):
    events = acc.Scalars(tag)
    check([e.step for e in events] == [s for s, _ in want], f"{where} {tag}: steps {[e.step for e in events]}")
    for e, (s, v) in zip(events, want):
        check(e.value == f32(v), f"{where} {tag} step {s}: {e.value} != {f32(v)}")


def check_histogram(acc, tag, step, values):
    events = acc.Histograms(tag)
    check(len(events) == 1 and events[0].step == step, f"histogram {tag}: {len(events)} events")
    if not events:
        return
    h, want = events[0].histogram_value, expected_histogram(values)
    for key in ("min", "max", "num"):
        check(getattr(h, key) == want[key], f"histogram {tag} {key}: {getattr(h, key)} != {want[key]}")
    for key in ("sum", "sum_squares"):  # summed in another order than numpy's pairwise sum
        check(abs(getattr(h, key) - want[key]) <= 1e-9 * max(1.0, abs(want[key])),
              f"histogram {tag} {key}: {getattr(h, key)} != {want[key]}")
    check(list(h.bucket_limit) == want["bucket_limit"], f"histogram {tag} bucket_limit differs")
    check(list(h.bucket) == [float(c) for c in want["bucket"]], f"histogram {tag} bucket {list(h.bucket)}")


def record_ends(path):
    """Byte offsets where each TFRecord of the file ends."""
    data, at, ends = open(path, "rb").read(), 0, []
    while at < len(data):
        (length,) = struct.unpack("<Q", data[at:at + 8])
        at += 16 + length
        ends.append(at)
    return ends


def main():
    args = start("tensorboard.backend.event_processing.event_accumulator", __file__)
    import numpy as np
    from tensorboard.backend.event_processing import event_file_loader
    from tensorboard.compat.proto import event_pb2

    log_dir = os.path.join(args.workdir, "logs")
    subprocess.run([args.driver, log_dir], check=True)

    files = glob.glob(os.path.join(log_dir, "events.out.tfevents.*"))
    check(len(files) == 1, f"{len(files)} event files in {log_dir}")
    acc = accumulator(log_dir)
    tags = acc.Tags()
    print("tags:", {k: v for k, v in tags.items() if v})
    check(acc.file_version == 2.0, f"file version {acc.file_version}")
    check(sorted(tags["scalars"]) == ["loss/train", "lr"], f"scalar tags {tags['scalars']}")
    check_scalars(acc, "loss/train", [(s, 1.0 / (s + 1)) for s in range(20)], "main")
    check_scalars(acc, "lr", [(s, 0.1 * 0.9 ** s) for s in range(20)], "main")

    for key, scale in (("train", 2.0), ("test", 4.0)):
        run = accumulator(os.path.join(log_dir, "loss_" + key))
        check(run.Tags()["scalars"] == ["loss"], f"add_scalars run loss_{key}: tags {run.Tags()['scalars']}")
        check_scalars(run, "loss", [(s, s / scale) for s in range(5)], f"loss_{key}")

    check(tags["tensors"] == ["config/text_summary"], f"tensor tags {tags['tensors']}")
    check("config/text_summary" in acc.PluginTagToContent("text"), "the text has no text-plugin metadata")
    texts = acc.Tensors("config/text_summary")
    check(len(texts) == 1 and texts[0].step == 0, "text: one event at step 0")
    if texts:
        check(texts[0].tensor_proto.string_val[0].decode("utf-8") == TEXT, f"text: {texts[0].tensor_proto.string_val}")

    check(sorted(tags["histograms"]) == ["activations", "weights"], f"histogram tags {tags['histograms']}")
    check_histogram(acc, "weights", 7, [(i - 50) * 0.37 for i in range(100)] + [0.0, 0.0, 1e-13])
    activations = [float(np.float32(i * i * 0.01 - 3)) for i in range(64)]
    check_histogram(acc, "activations", 8, activations)

    # A copy cut in the middle of a record: TensorBoard's loader reads the records before it.
    path = files[0]
    # The raw loader: the records as written (EventFileLoader would migrate scalars to tensors).
    full = list(event_file_loader.RawEventFileLoader(path).Load())
    ends = record_ends(path)
    check(len(full) == len(ends), f"{len(full)} events read, {len(ends)} records framed")
    for k in (len(ends) - 1, len(ends) // 2):  # cut inside the last record, and a middle one
        cut_dir = os.path.join(args.workdir, f"cut_{k}")
        os.makedirs(cut_dir)
        cut_path = os.path.join(cut_dir, os.path.basename(path))
        cut_at = ends[k - 1] + (ends[k] - ends[k - 1]) // 2
        with open(path, "rb") as src, open(cut_path, "wb") as dst:
            dst.write(src.read(cut_at))
        part = list(event_file_loader.RawEventFileLoader(cut_path).Load())
        check(part == full[:k], f"cut at byte {cut_at}: {len(part)} events, want the first {k}")
        events = [event_pb2.Event.FromString(r) for r in full[:k]]
        want = [(e.step, e.summary.value[0].simple_value) for e in events
                if e.HasField("summary") and e.summary.value[0].tag == "loss/train"]
        cut_acc = accumulator(cut_dir)
        got = [(e.step, e.value) for e in cut_acc.Scalars("loss/train")] if "loss/train" in cut_acc.Tags()["scalars"] else []
        check(got == want, f"cut at byte {cut_at}: loss/train {got[:3]}... ({len(got)} points), want {want[:3]}... ({len(want)})")
        print(f"cut at byte {cut_at} of {ends[-1]}: {len(part)} of {len(full)} events read")

    finish(__file__, "every scalar, text and histogram read back by TensorBoard's EventAccumulator")


if __name__ == "__main__":
    main()
