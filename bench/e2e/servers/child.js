// What every server child shares: listen on loopback, report the port to the
// parent, answer questions on its memory, CPU time and requests served, and
// leave when the parent says so or goes away.
export async function serve(server) {
  let requests = 0
  server.on('request', () => requests++)
  await new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', resolve)
  })
  process.on('message', (message) => {
    if (message === 'memory') process.send({ memory: process.memoryUsage().rss })
    if (message === 'requests') process.send({ requests })
    if (message === 'cpu') {
      const { user, system } = process.cpuUsage()
      process.send({ cpu: user + system })
    }
    // A normal exit, so that `--cpu-prof` can write its profile.
    if (message === 'stop') {
      server.close(() => process.exit(0))
      server.closeAllConnections()
    }
  })
  process.on('disconnect', () => process.exit(0))
  process.send({ port: server.address().port })
}

/** The backend's URL, given by the parent. */
export const target = () => process.env.BENCH_TARGET
