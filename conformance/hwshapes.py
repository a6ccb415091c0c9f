"""Hardware shapes as users name them: a bundled name (``server-8gpu``) or a shape file, read
here, at the edge, by drakit's one input reader (:mod:`drakit.conformance.inputs`: a regular
file, its size bounded, strict UTF-8) and parsed by ``fake_hw`` (bounded YAML), which reads no
file itself."""

from __future__ import annotations

from pathlib import Path

from drakit.fake_hw.inventory import NodeInventory, build_inventory as _build
from drakit.fake_hw.shapes import Shape, ShapeError, is_shape_file, load_shape, shape_from_text

from .inputs import SHAPE, InputError, read_text


def read_shape(shape: Shape | str | Path) -> Shape:
    """The shape a case, an option or a caller names: a ``Shape`` as it is, a bundled name
    loaded, a file read and parsed; :class:`ShapeError` (one line naming the file) otherwise."""
    if isinstance(shape, Shape):
        return shape
    if not is_shape_file(shape):
        return load_shape(str(shape))
    path = Path(shape)
    try:
        text = read_text(path, SHAPE)
    except InputError as err:
        raise ShapeError(f"{path}: cannot read shape file: {err.reason}") from None
    return shape_from_text(text, str(path))


def build_inventory(shape: Shape | str | Path, node_name: str) -> NodeInventory:
    """``fake_hw``'s :func:`~drakit.fake_hw.inventory.build_inventory` for a shape as users name
    it (a shape file read here first): what the edges call."""
    return _build(read_shape(shape), node_name)
