/** The signals that stop `serve` and `demo` (docs/deployment-reference.md, stopping). */
export interface StopSignals {
  /** Resolves on the first SIGTERM (Kubernetes stopping the pod) or SIGINT (Ctrl-C). */
  readonly stop: Promise<NodeJS.Signals>
  /** Resolves on SIGINT, or on a second SIGTERM: what is left of the shutdown delay is skipped. */
  readonly hurry: Promise<void>
}

/**
 * Listens for SIGTERM and SIGINT for the life of the process, so that a later
 * signal during the delay or the drain never kills it half-way. `onSignal`
 * hears every one (the workers' primary passes them on).
 */
export function stopSignals(onSignal: (signal: NodeJS.Signals) => void = () => undefined): StopSignals {
  let stop!: (signal: NodeJS.Signals) => void
  let hurry!: () => void
  let received = 0
  const signals: StopSignals = {
    stop: new Promise((resolve) => (stop = resolve)),
    hurry: new Promise((resolve) => (hurry = resolve)),
  }
  const listener = (signal: NodeJS.Signals) => {
    received++
    if (signal === 'SIGINT' || received > 1) hurry()
    stop(signal)
    onSignal(signal)
  }
  process.on('SIGTERM', listener)
  process.on('SIGINT', listener)
  return signals
}

/** Waits `seconds`, or less when `hurry` resolves first. */
export async function shutdownDelay(seconds: number, hurry: Promise<void>): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  await Promise.race([hurry, new Promise<void>((resolve) => (timer = setTimeout(resolve, seconds * 1000)))])
  clearTimeout(timer)
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

/**
 * A stop signal before start-up is done ends the process (a gateway, a worker, or the primary until it has forked
 * its workers): nothing is served yet, and a wait that never ends (a store that does not answer, a disk that does
 * not) would keep it alive, and a signal ignored, for as long as it lasts. The signal is raised again with its
 * listeners gone, so the kernel ends the process whatever its threads are doing.
 */
export async function startOrStop<T>(starting: Promise<T>, stop: Promise<NodeJS.Signals>): Promise<T> {
  // Over once start-up has ended either way: a start-up that failed has its own way out (exit 2).
  let started = false
  void stop.then((signal) => {
    if (started) return
    /* c8 ignore start: the process ends here, by its signal, before V8 can write its coverage */
    process.removeAllListeners(signal)
    process.kill(process.pid, signal)
    /* c8 ignore stop */
  })
  try {
    return await starting
  } finally {
    started = true
  }
}
