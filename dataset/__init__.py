"""The built dataset folder as its readers see it (`DatasetFolder`), shared by `pipeline` and
`training`; it imports nothing else of the project."""

from numerical3d.dataset.folder import CARD, FORMAT_VERSION, MANIFEST, DatasetError, DatasetFolder, DatasetInfo, card_configs

__all__ = ["CARD", "FORMAT_VERSION", "MANIFEST", "DatasetError", "DatasetFolder", "DatasetInfo", "card_configs"]
