"""Reading profiles: the input formats (Nsight Systems exports, PyTorch Kineto traces) and the dispatch between them."""
