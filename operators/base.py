"""What every BVB operator shares: a poll that says why it is unavailable."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bpy.stub_internal.rna_enums import OperatorReturnItems, WmReportItems
    from bpy.types import Context, Operator

    # For the type checker the mixin is an Operator (poll_message_set, report); at runtime it is a
    # plain mixin, and each operator class names bpy.types.Operator itself.
    _OperatorBase = Operator
else:
    _OperatorBase = object


class BVBPollMixin(_OperatorBase):
    """Operators define ``unavailable(context) -> str | None``; poll shows that reason greyed out."""

    @classmethod
    def unavailable(cls, context):
        return None

    @classmethod
    def poll(cls, context):
        if getattr(context, "scene", None) is None or not hasattr(context.scene, "bvb"):
            cls.poll_message_set("BVB needs a scene; open or create one")
            return False
        reason = cls.unavailable(context)
        if reason:
            cls.poll_message_set(reason)
            return False
        return True


def settings(context: "Context") -> Any:
    """The scene's BVB settings: Scene.bvb, a pointer properties.register adds at runtime (the stubs know none)."""
    return context.scene.bvb  # type: ignore[attr-defined]


def done(
    operator: "Operator", context: "Context", message: str, level: "WmReportItems" = "INFO"
) -> "set[OperatorReturnItems]":
    """Report a message and keep it as the panel's status line."""
    settings(context).status = message
    operator.report({level}, message)
    return {"FINISHED"} if level != "ERROR" else {"CANCELLED"}


def fail(operator: "Operator", context: "Context", message: str) -> "set[OperatorReturnItems]":
    return done(operator, context, message, level="ERROR")
