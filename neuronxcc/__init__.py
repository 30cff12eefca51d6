"""The legacy NKI dialect's package name: ``from neuronxcc import nki``, ``neuronxcc.nki.language``,
``neuronxcc.nki.isa`` and ``neuronxcc.nki.typing`` are the ``nki`` package's modules (one
implementation, two import paths). Only ``neuronxcc.nki`` is provided, not the vendor's compiler."""
