"""Campaigns over several GPU boxes (``verifylab fleet``): the campaign file, its state, the job each box runs and
how its runs come back are plain Python here; only :mod:`verifylab.fleet.ray_runner` imports Ray (the ``fleet``
extra: ``pip install verifylab[fleet]``)."""
