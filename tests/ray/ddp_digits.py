"""A real distributed training job: PyTorch DDP (gloo, CPU) on scikit-learn's digits dataset.

Run by gpuyard as one task per rank; `torch.distributed` reads MASTER_ADDR, MASTER_PORT,
WORLD_SIZE and RANK from the environment the platform gives every task of the job. Rank 0
checkpoints to /output/checkpoint.pt after every epoch and a later attempt resumes from it;
at the end it writes /output/result.json with the test accuracy.

EPOCHS (default 40) and EPOCH_SLEEP_S (default 0: a pause per epoch, so tests can act while
the job runs) tune it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

OUTPUT = Path("/output")
CHECKPOINT = OUTPUT / "checkpoint.pt"


def datasets() -> tuple[TensorDataset, TensorDataset]:
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target, dtype=torch.long)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.25, random_state=0)
    return TensorDataset(x_train, y_train), TensorDataset(x_test, y_test)


def accuracy(model: nn.Module, data: TensorDataset) -> float:
    x, y = data.tensors
    with torch.no_grad():
        return (model(x).argmax(dim=1) == y).float().mean().item()


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"rank {rank}/{world} on {os.uname().nodename}, master "
          f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}", flush=True)
    train, test = datasets()
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    first_epoch = 0
    if CHECKPOINT.exists():
        state = torch.load(CHECKPOINT)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        first_epoch = state["epoch"] + 1
        print(f"rank {rank}: resumed from epoch {first_epoch}", flush=True)
    ddp = DistributedDataParallel(model)
    sampler = DistributedSampler(train, num_replicas=world, rank=rank, seed=0)
    loader = DataLoader(train, batch_size=32, sampler=sampler)
    epochs, pause = int(os.environ.get("EPOCHS", "40")), float(os.environ.get("EPOCH_SLEEP_S", "0"))
    for epoch in range(first_epoch, epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(ddp(x), y).backward()
            optimizer.step()
        if rank == 0:
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "epoch": epoch}, CHECKPOINT)
        print(f"rank {rank}: epoch {epoch} test accuracy {accuracy(model, test):.3f}", flush=True)
        time.sleep(pause)
    dist.barrier()
    if rank == 0:
        result = {"accuracy": accuracy(model, test), "epochs": epochs, "world_size": world,
                  "resumed_from": first_epoch}
        (OUTPUT / "result.json").write_text(json.dumps(result))
        print(f"final test accuracy {result['accuracy']:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
