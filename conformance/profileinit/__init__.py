"""``drakit profile init``: a vendor profile drafted from what a running driver shows.

- :mod:`.infer` (pure): the facts of a driver's ResourceSlices and DeviceClasses (pools, attribute
  names and types mapped to drakit's logical keys, capacities, request policies, numaNode, the
  optional behaviours its devices show);
- :mod:`.envgen` (pure): the environment its CDI edits gave probe containers, generalised into
  ``containerEnv`` templates by comparing devices and claims;
- :mod:`.render` (pure): the draft as a version 2 profile, with a commented line for each thing
  drakit cannot observe (the driver's intent);
- :mod:`.probe` (cluster I/O): claims of one and of two devices, and pods that print their
  environment, on a cluster where the driver runs;
- :mod:`.cli`: the command, and the local cluster it may start.
"""
