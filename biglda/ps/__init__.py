"""The parameter server: table-shard actors, the SSP clock, the worker-side row cache."""

from biglda.ps.cache import ShardCache
from biglda.ps.calls import call, call_all
from biglda.ps.server import (
    ClockServer,
    ParameterServer,
    PSShard,
    check_table_fits,
    row_bounds,
    start_parameter_server,
)

__all__ = ["ClockServer", "PSShard", "ParameterServer", "ShardCache", "call", "call_all",
           "check_table_fits", "row_bounds", "start_parameter_server"]
