"""Models loaded for looking at from Python and Jupyter (`attnexp.api.load`): a layer above the model
and the maps, since it joins them."""
