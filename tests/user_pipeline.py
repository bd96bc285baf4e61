"""An input pipeline written the way public MNIST code writes it (torchvision's `transforms.Compose`
of `ToTensor` and `Normalize`, a test `Dataset`, a `DataLoader`), for `--against-input`. torchvision
is not a capsviz dependency: `transforms` below is a stand-in with its API and its arithmetic."""

from types import SimpleNamespace

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from capsviz.data import load_split


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


class ToTensor:
    def __call__(self, pic):  # a PIL image (H, W) of uint8 -> (1, H, W) in [0, 1], as torchvision's
        return torch.from_numpy(np.array(pic, dtype=np.uint8)).float().div(255).unsqueeze(0)


class Normalize:
    def __init__(self, mean, std):
        self.mean, self.std = mean, std

    def __call__(self, t):
        return (t - torch.tensor(self.mean).view(-1, 1, 1)) / torch.tensor(self.std).view(-1, 1, 1)


transforms = SimpleNamespace(Compose=Compose, ToTensor=ToTensor, Normalize=Normalize)

test_transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])


class MNISTTest(Dataset):
    """The test split as torchvision's MNIST gives it: (transform(PIL image), label)."""

    def __init__(self, transform=None):
        from PIL import Image

        data = load_split("mnist", "test")
        self.images = [Image.fromarray(im.numpy()) for im in data.images[:64]]
        self.labels, self.transform = data.labels[:64], transform

    def __len__(self):
        return len(self.images)

    def __getitem__(self, k):
        img = self.images[k]
        return (self.transform(img) if self.transform else img), int(self.labels[k])


def test_set():
    return MNISTTest(transform=test_transform)


def test_loader():
    return DataLoader(test_set(), batch_size=8, shuffle=False)


def padded_transform(img):  # to 32 x 32, as LeNet-style code pads MNIST
    return torch.nn.functional.pad(test_transform(img), (2, 2, 2, 2))


def shuffled_loader():
    return DataLoader(test_set(), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(0))
