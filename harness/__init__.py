"""powercut: prove a Kubernetes cluster survives the loss of its failure domains."""

__version__ = "0.1.0"
