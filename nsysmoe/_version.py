"""The version, declared once (pyproject reads it from here); below every module that needs it."""

__version__ = "0.1.0"
