"""Protobuf descriptors this package builds at import time (no generated code, private pools).

* ``kubernetes.Quantity`` and ``kubernetes.Semver``: cel-expr-python can only carry custom values
  as protobuf messages. Each has one string field holding a *canonical* text (an exact fraction
  for quantities, the version without build metadata for semvers), so the engine's message
  equality is exactly Kubernetes' equality for these types.
* A subset of ``cel.expr.CheckedExpr`` (expressions and source positions): enough to read and
  rewrite the checked AST that ``Expression.serialize()`` returns. Fields not declared here (type
  and reference maps) are carried through unchanged as unknown fields.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto

QUANTITY_TYPE = "kubernetes.Quantity"
SEMVER_TYPE = "kubernetes.Semver"
CHECKED_EXPR_URL = "type.googleapis.com/cel.expr.CheckedExpr"


def _add_field(msg: Any, name: str, number: int, ftype: int, type_name: str = "",
               repeated: bool = False, oneof: int | None = None) -> None:
    field = msg.field.add(name=name, number=number, type=ftype,
                          label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL)
    if type_name:
        field.type_name = type_name
    if oneof is not None:
        field.oneof_index = oneof


def _value_types() -> tuple[descriptor_pool.DescriptorPool, Any, Any]:
    pool = descriptor_pool.DescriptorPool()
    fdp = descriptor_pb2.FileDescriptorProto(name="drakit/kubernetes_cel_types.proto",
                                             package="kubernetes", syntax="proto3")
    for name in ("Quantity", "Semver"):
        _add_field(fdp.message_type.add(name=name), "value", 1, _F.TYPE_STRING)
    pool.Add(fdp)
    get = message_factory.GetMessageClass
    return pool, get(pool.FindMessageTypeByName(QUANTITY_TYPE)), get(pool.FindMessageTypeByName(SEMVER_TYPE))


def _ast_file() -> descriptor_pb2.FileDescriptorProto:
    fdp = descriptor_pb2.FileDescriptorProto(name="drakit/cel_expr_subset.proto", package="cel.expr", syntax="proto3")
    expr_t, const_t = ".cel.expr.Expr", ".cel.expr.Constant"
    const = fdp.message_type.add(name="Constant")
    const.oneof_decl.add(name="constant_kind")
    for name, num, ftype in (("null_value", 1, _F.TYPE_INT32), ("bool_value", 2, _F.TYPE_BOOL),
                             ("int64_value", 3, _F.TYPE_INT64), ("uint64_value", 4, _F.TYPE_UINT64),
                             ("double_value", 5, _F.TYPE_DOUBLE), ("string_value", 6, _F.TYPE_STRING),
                             ("bytes_value", 7, _F.TYPE_BYTES)):
        _add_field(const, name, num, ftype, oneof=0)
    expr = fdp.message_type.add(name="Expr")
    expr.oneof_decl.add(name="expr_kind")
    _add_field(expr, "id", 2, _F.TYPE_INT64)
    for name, num, sub in (("const_expr", 3, const_t), ("ident_expr", 4, ".cel.expr.Expr.Ident"),
                           ("select_expr", 5, ".cel.expr.Expr.Select"), ("call_expr", 6, ".cel.expr.Expr.Call"),
                           ("list_expr", 7, ".cel.expr.Expr.CreateList"),
                           ("struct_expr", 8, ".cel.expr.Expr.CreateStruct"),
                           ("comprehension_expr", 9, ".cel.expr.Expr.Comprehension")):
        _add_field(expr, name, num, _F.TYPE_MESSAGE, sub, oneof=0)
    _add_field(expr.nested_type.add(name="Ident"), "name", 1, _F.TYPE_STRING)
    select = expr.nested_type.add(name="Select")
    _add_field(select, "operand", 1, _F.TYPE_MESSAGE, expr_t)
    _add_field(select, "field", 2, _F.TYPE_STRING)
    _add_field(select, "test_only", 3, _F.TYPE_BOOL)
    call = expr.nested_type.add(name="Call")
    _add_field(call, "target", 1, _F.TYPE_MESSAGE, expr_t)
    _add_field(call, "function", 2, _F.TYPE_STRING)
    _add_field(call, "args", 3, _F.TYPE_MESSAGE, expr_t, repeated=True)
    create_list = expr.nested_type.add(name="CreateList")
    _add_field(create_list, "elements", 1, _F.TYPE_MESSAGE, expr_t, repeated=True)
    _add_field(create_list, "optional_indices", 2, _F.TYPE_INT32, repeated=True)
    create_struct = expr.nested_type.add(name="CreateStruct")
    _add_field(create_struct, "message_name", 1, _F.TYPE_STRING)
    _add_field(create_struct, "entries", 2, _F.TYPE_MESSAGE, ".cel.expr.Expr.CreateStruct.Entry", repeated=True)
    entry = create_struct.nested_type.add(name="Entry")
    entry.oneof_decl.add(name="key_kind")
    _add_field(entry, "id", 1, _F.TYPE_INT64)
    _add_field(entry, "field_key", 2, _F.TYPE_STRING, oneof=0)
    _add_field(entry, "map_key", 3, _F.TYPE_MESSAGE, expr_t, oneof=0)
    _add_field(entry, "value", 4, _F.TYPE_MESSAGE, expr_t)
    _add_field(entry, "optional_entry", 5, _F.TYPE_BOOL)
    comp = expr.nested_type.add(name="Comprehension")
    for name, num, ftype, sub in (("iter_var", 1, _F.TYPE_STRING, ""), ("iter_range", 2, _F.TYPE_MESSAGE, expr_t),
                                  ("accu_var", 3, _F.TYPE_STRING, ""), ("accu_init", 4, _F.TYPE_MESSAGE, expr_t),
                                  ("loop_condition", 5, _F.TYPE_MESSAGE, expr_t),
                                  ("loop_step", 6, _F.TYPE_MESSAGE, expr_t), ("result", 7, _F.TYPE_MESSAGE, expr_t),
                                  ("iter_var2", 8, _F.TYPE_STRING, "")):
        _add_field(comp, name, num, ftype, sub)
    source = fdp.message_type.add(name="SourceInfo")
    _add_field(source, "line_offsets", 3, _F.TYPE_INT32, repeated=True)
    _add_field(source, "positions", 4, _F.TYPE_MESSAGE, ".cel.expr.SourceInfo.PositionsEntry", repeated=True)
    positions = source.nested_type.add(name="PositionsEntry")
    positions.options.map_entry = True
    _add_field(positions, "key", 1, _F.TYPE_INT64)
    _add_field(positions, "value", 2, _F.TYPE_INT32)
    _add_type_messages(fdp)
    checked = fdp.message_type.add(name="CheckedExpr")
    _add_field(checked, "type_map", 3, _F.TYPE_MESSAGE, ".cel.expr.CheckedExpr.TypeMapEntry", repeated=True)
    type_entry = checked.nested_type.add(name="TypeMapEntry")
    type_entry.options.map_entry = True
    _add_field(type_entry, "key", 1, _F.TYPE_INT64)
    _add_field(type_entry, "value", 2, _F.TYPE_MESSAGE, ".cel.expr.Type")
    _add_field(checked, "expr", 4, _F.TYPE_MESSAGE, expr_t)
    _add_field(checked, "source_info", 5, _F.TYPE_MESSAGE, ".cel.expr.SourceInfo")
    return fdp


def _add_type_messages(fdp: descriptor_pb2.FileDescriptorProto) -> None:
    """``cel.expr.Type`` (enums as int32, ``google.protobuf.Empty`` as a local empty message)."""
    fdp.message_type.add(name="Empty")
    type_t = ".cel.expr.Type"
    typ = fdp.message_type.add(name="Type")
    typ.oneof_decl.add(name="type_kind")
    for name, num, ftype, sub in (("dyn", 1, _F.TYPE_MESSAGE, ".cel.expr.Empty"), ("null", 2, _F.TYPE_INT32, ""),
                                  ("primitive", 3, _F.TYPE_INT32, ""), ("wrapper", 4, _F.TYPE_INT32, ""),
                                  ("well_known", 5, _F.TYPE_INT32, ""),
                                  ("list_type", 6, _F.TYPE_MESSAGE, ".cel.expr.Type.ListType"),
                                  ("map_type", 7, _F.TYPE_MESSAGE, ".cel.expr.Type.MapType"),
                                  ("function", 8, _F.TYPE_MESSAGE, ".cel.expr.Type.FunctionType"),
                                  ("message_type", 9, _F.TYPE_STRING, ""), ("type_param", 10, _F.TYPE_STRING, ""),
                                  ("type", 11, _F.TYPE_MESSAGE, type_t),
                                  ("error", 12, _F.TYPE_MESSAGE, ".cel.expr.Empty"),
                                  ("abstract_type", 14, _F.TYPE_MESSAGE, ".cel.expr.Type.AbstractType")):
        _add_field(typ, name, num, ftype, sub, oneof=0)
    _add_field(typ.nested_type.add(name="ListType"), "elem_type", 1, _F.TYPE_MESSAGE, type_t)
    map_type = typ.nested_type.add(name="MapType")
    _add_field(map_type, "key_type", 1, _F.TYPE_MESSAGE, type_t)
    _add_field(map_type, "value_type", 2, _F.TYPE_MESSAGE, type_t)
    function = typ.nested_type.add(name="FunctionType")
    _add_field(function, "result_type", 1, _F.TYPE_MESSAGE, type_t)
    _add_field(function, "arg_types", 2, _F.TYPE_MESSAGE, type_t, repeated=True)
    abstract = typ.nested_type.add(name="AbstractType")
    _add_field(abstract, "name", 1, _F.TYPE_STRING)
    _add_field(abstract, "parameter_types", 2, _F.TYPE_MESSAGE, type_t, repeated=True)


def _ast_types() -> Any:
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_ast_file())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("cel.expr.CheckedExpr"))


VALUE_POOL, QuantityMessage, SemverMessage = _value_types()
CheckedExpr = _ast_types()
