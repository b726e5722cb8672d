"""Fashion-MNIST from its IDX files, read with NumPy alone.

Debian's `dataset-fashion-mnist` puts the four files, gzipped, in
/usr/share/datasets/fashion-mnist; $DDPH_FASHION_MNIST names another folder.
Plain (gunzipped) files are read as well.
"""
import gzip
import os

import numpy as np

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"
FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
# Mean and standard deviation of the training images' pixels (0..1 scale).
PIXEL_MEAN, PIXEL_STD = 0.2860, 0.3530

# IDX type codes (the third byte of the magic number) -> NumPy big-endian dtypes.
IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def data_dir():
    return os.environ.get("DDPH_FASHION_MNIST", DEFAULT_DIR)


def _open(folder, stem):
    for name, opener in ((stem + ".gz", gzip.open), (stem, open)):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            return path, opener(path, "rb")
    raise FileNotFoundError("Fashion-MNIST: neither %s.gz nor %s in %s (install Debian's "
                            "dataset-fashion-mnist, or set DDPH_FASHION_MNIST)" %
                            (stem, stem, folder))


def read_idx(folder, stem):
    """The array an IDX file holds, in its own shape and dtype."""
    path, f = _open(folder, stem)
    with f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in IDX_DTYPES:
        raise ValueError("%s: not an IDX file (magic %s)" % (path, raw[:4].hex()))
    ndim = raw[3]
    header = 4 + 4 * ndim
    shape = tuple(int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    dtype = np.dtype(IDX_DTYPES[raw[2]])
    count = int(np.prod(shape)) if shape else 0
    if len(raw) != header + count * dtype.itemsize:
        raise ValueError("%s: %d bytes, the header promises %d" %
                         (path, len(raw), header + count * dtype.itemsize))
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape)


def available():
    """None when the files are there, else the reason they are not."""
    try:
        for stems in FILES.values():
            for stem in stems:
                _open(data_dir(), stem)[1].close()
    except FileNotFoundError as e:
        return str(e)
    return None


def load(split):
    """(images float32 [N, 1, 28, 28], normalized; labels int64 [N]) of 'train' or 'test'."""
    images_stem, labels_stem = FILES[split]
    images = read_idx(data_dir(), images_stem)
    labels = read_idx(data_dir(), labels_stem)
    if images.shape[0] != labels.shape[0] or images.shape[1:] != (28, 28):
        raise ValueError("Fashion-MNIST %s: images %s and labels %s do not match" %
                         (split, images.shape, labels.shape))
    x = (images.astype(np.float32) / 255.0 - PIXEL_MEAN) / PIXEL_STD
    return x.reshape(-1, 1, 28, 28), labels.astype(np.int64)
