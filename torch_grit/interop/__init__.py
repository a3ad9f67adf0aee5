"""Other tools' files: GGUF import and export (``interop.gguf``), and ``load`` / ``save``,
which pick the format by the path."""
