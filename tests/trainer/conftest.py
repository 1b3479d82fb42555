import torch

torch.set_num_threads(1)  # the machine is shared; the tiny model is fast enough single-threaded
