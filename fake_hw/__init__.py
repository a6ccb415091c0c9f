"""Emulated hardware for drakit: vendors, node shapes, topology, inventories and faults.

Pure and deterministic: nothing here reads anything but the bundled shape files (or a shape
file it is pointed at), and the same shape and node name always give the same devices.

Entry points: ``load_shape`` (``fake_hw.shapes``), ``build_inventory`` (``fake_hw.inventory``),
``Fault`` and ``device_taints`` (``fake_hw.faults``), and the vendor table in
``fake_hw.vendors``.
"""
