"""``nsys recipe nsysmoe``: nsysmoe as a recipe of NVIDIA's Nsight Systems recipe framework.

:mod:`nsysmoe.recipe.outputs` holds what it computes and writes (no framework needed);
:mod:`nsysmoe.recipe.nsys` is the framework's Recipe subclass, imported only by ``nsys recipe``
(it needs ``nsys_recipe``). ``nsysmoe recipe-path`` prints the folder to put in
``NSYS_RECIPE_PATH``: the one holding this package, whose ``metadata.json`` names the recipe."""
