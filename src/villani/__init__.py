"""villani: curvature (Villani diagnostic, Hessian trace and spectrum) of weight-decayed GPT-Neo language models."""
