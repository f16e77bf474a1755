/** Waiting: for an event by polling a condition, bounded. It imports nothing, so any helper may use it. */

export function waitFor(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/** Polls until the predicate holds, every `everyMs`, at most `ms`; the caller asserts the outcome. */
export async function until(predicate: () => boolean | Promise<boolean>, ms = 5000, everyMs = 10): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await waitFor(everyMs)) if (await predicate()) return true
  return predicate()
}
