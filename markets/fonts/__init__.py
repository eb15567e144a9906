"""A CJK font subset shipped for charts (see LICENSE-OFL.md)."""
