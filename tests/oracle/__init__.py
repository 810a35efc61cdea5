"""The oracle suite: jta against live TensorFlow (see ``conftest.py``)."""
