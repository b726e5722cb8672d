"""The two models of the time-to-accuracy benchmark.

- mlp: 784-1024-1024-10 with ReLU, 1.86 M parameters (7.4 MB of fp32
  gradients a step): communication-heavy, where compression can pay.
- cnn: two 5x5 convolutions (16 and 32 channels, each followed by 2x2 max
  pooling), then 512-256-10: 0.15 M parameters (0.59 MB a step) for about
  as much arithmetic per image as the MLP: compute-bound, where it should not.
"""
from torch import nn


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024),
                         nn.ReLU(), nn.Linear(1024, 10))


def cnn():
    return nn.Sequential(nn.Conv2d(1, 16, 5), nn.ReLU(), nn.MaxPool2d(2),  # 16 x 12 x 12
                         nn.Conv2d(16, 32, 5), nn.ReLU(), nn.MaxPool2d(2),  # 32 x 4 x 4
                         nn.Flatten(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))


MODELS = {"mlp": mlp, "cnn": cnn}
