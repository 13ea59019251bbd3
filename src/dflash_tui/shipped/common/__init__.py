"""What the shipped programs share: their error classes and the parts of their command
lines that are the same (JSON events on stdout, the device check, exit codes).

Shipped beside each program (the upload bundles `common/` with it), so it too imports
only the standard library and, inside functions, torch.
"""
