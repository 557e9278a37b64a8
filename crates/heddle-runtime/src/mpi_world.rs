//! Jobs whose links all run over MPI (`HEDDLE_TRANSPORT=mpi`, a build with the `mpi`
//! feature, started by `mpirun` or `srun`): MPI gives the ranks and carries every frame, so
//! there is no job master, no rendezvous and no TCP or shared-memory link of Heddle's own.
//! A worker that fails takes the MPI job down with `MPI_Abort`, as MPI programs do.

use heddle_comm::{CommConfig, Communicator};

use crate::{Error, Result};

/// Joins the MPI job as a world of all its processes.
///
/// # Errors
/// [`Error::Env`] if this build has no MPI support or MPI cannot start.
#[cfg(feature = "mpi")]
pub(crate) fn init(config: CommConfig) -> Result<Communicator> {
    use heddle_comm::transport::mpi::MpiWorld;
    use heddle_comm::WorldBuilder;

    let world = MpiWorld::init().map_err(|e| Error::Env(format!("HEDDLE_TRANSPORT=mpi: {e}")))?;
    let mut builder = WorldBuilder::new(world.rank, world.size, config)?;
    let names = world.allgather_names(&crate::bootstrap::host_id())?;
    builder.set_hosts(crate::bootstrap::host_numbers(&names))?;
    for peer in (0..world.size).filter(|&p| p != world.rank) {
        builder.add_mpi(peer, &world);
    }
    let comm = builder.build()?;
    let abort = comm.abort_handle();
    abort.set_reporter(Box::new(move |cause| {
        eprintln!("heddle: rank {}: {cause}: aborting the MPI job", world.rank);
        world.abort(1);
    }));
    crate::bootstrap::abort_on_panic(&abort, world.rank);
    Ok(comm)
}

/// Without the `mpi` feature: says how to get it.
///
/// # Errors
/// Always [`Error::Env`].
#[cfg(not(feature = "mpi"))]
pub(crate) fn init(_config: CommConfig) -> Result<Communicator> {
    Err(Error::Env(
        "HEDDLE_TRANSPORT=mpi needs Heddle built with its `mpi` feature (the `heddle` crate \
         has it by default; building it needs Open MPI's libopenmpi-dev and libclang-dev)"
            .into(),
    ))
}
