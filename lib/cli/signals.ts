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
