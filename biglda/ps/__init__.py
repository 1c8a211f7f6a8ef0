"""The parameter server: table-shard actors, the SSP clock, their clients, the row cache.

Modules: ``protocol`` (clock answers, clock sentinels), ``rules`` (pure SSP / stop / alpha /
mailbox rules), ``table`` and ``clock`` (the actors), ``client`` (the only code that names an
actor method), ``calls`` (timeouts and errors of every call), ``sizing`` (row ranges, the
memory check), ``startup`` (placing the actors), ``cache`` (a worker shard's rows).
"""

from biglda.ps.cache import ShardCache
from biglda.ps.calls import call, call_all
from biglda.ps.client import AlphaClient, ClockClient, MailboxClient, PSClient, TableClient
from biglda.ps.clock import ClockServer
from biglda.ps.process_cache import ProcessCache
from biglda.ps.protocol import ALL_CLOCKS, NO_CLOCK, ClockAnswer
from biglda.ps.sizing import check_table_fits, row_bounds, table_bytes_per_worker
from biglda.ps.startup import ParameterServer, start_parameter_server
from biglda.ps.table import TableShard

__all__ = ["ALL_CLOCKS", "NO_CLOCK", "AlphaClient", "ClockAnswer", "ClockClient", "ClockServer",
           "MailboxClient", "PSClient", "ParameterServer", "ProcessCache", "ShardCache",
           "TableClient",
           "TableShard", "call", "call_all", "check_table_fits", "row_bounds",
           "start_parameter_server", "table_bytes_per_worker"]
