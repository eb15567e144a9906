"""Bar providers behind the MarketData port: bundled dataset, CSV folder, and optional network
backends (akshare, yfinance, ccxt) whose libraries are imported only when used."""

from markets.providers.base import BarProvider
from markets.providers.bundled import BundledProvider
from markets.providers.csvfolder import CsvFolderProvider

__all__ = ["BarProvider", "BundledProvider", "CsvFolderProvider"]
