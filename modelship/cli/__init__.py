"""The top layer: every command and its flag groups (`modelship ...`, `export-model`). Commands parse flags into
dataclasses and call the layers below; nothing below imports from here."""
