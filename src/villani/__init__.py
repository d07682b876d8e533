"""villani: curvature (Villani diagnostic, Hessian trace and spectrum) of weight-decayed GPT-Neo language models."""

__version__ = "0.1.0"
