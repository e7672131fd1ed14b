"""What a pass costs: the one pricer (a pass as a record of named terms; a saving is the difference of two records),
the collectives per communication regime, a box's curves and calibration, speculation's gain, the physical floors."""
