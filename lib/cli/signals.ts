/**
 * Resolves on the first SIGTERM (Kubernetes stopping the pod) or SIGINT
 * (Ctrl-C). The listeners stay for the life of the process, so a second
 * signal during the drain does not kill it half-way.
 */
export function stopSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    process.on('SIGTERM', resolve)
    process.on('SIGINT', resolve)
  })
}

/**
 * SIGHUP (a supervisor's "reload", or a closed terminal) re-reads the policies
 * and the credentials instead of ending the process, node's default (exit 129).
 * The listener is there from the start; until a reload is given, a SIGHUP is
 * ignored: start-up is reading the files anyway.
 */
export function reloadSignal(): (reload: () => void) => void {
  let handler = (): void => undefined
  process.on('SIGHUP', () => handler())
  return (reload) => {
    handler = reload
  }
}
