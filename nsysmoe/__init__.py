"""nsysmoe: how much MoE communication the compute hid, from Nsight Systems exports."""

__version__ = "0.1.0"
