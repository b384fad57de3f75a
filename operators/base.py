"""What every BVB operator shares: a poll that says why it is unavailable."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # For the type checker the mixin is an Operator (poll_message_set, report); at runtime it is a
    # plain mixin, and each operator class names bpy.types.Operator itself.
    from bpy.types import Operator as _OperatorBase
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


def settings(context):
    return context.scene.bvb


def done(operator, context, message, level="INFO"):
    """Report a message and keep it as the panel's status line."""
    context.scene.bvb.status = message
    operator.report({level}, message)
    return {"FINISHED"} if level != "ERROR" else {"CANCELLED"}


def fail(operator, context, message):
    return done(operator, context, message, level="ERROR")
