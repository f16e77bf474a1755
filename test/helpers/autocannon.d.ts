/** The part of autocannon's programmatic API the load tests use (the package ships no types). */
declare module 'autocannon' {
  export interface Request {
    method?: string
    path?: string
    headers?: Record<string, string>
    body?: string
  }
  export interface Options {
    url: string
    connections?: number
    /** Seconds. */
    duration?: number
    /** Stop after this many requests. */
    amount?: number
    /** Seconds a request may take before it counts as a timeout. */
    timeout?: number
    requests?: Request[]
  }
  export interface Result {
    requests: { total: number }
    errors: number
    timeouts: number
    resets: number
    statusCodeStats: Record<string, { count: number }>
  }
  /** A run: its result once over, and `stop()` to end it before its duration. */
  export interface Run extends PromiseLike<Result> {
    stop(): void
  }
  function autocannon(options: Options): Run
  export default autocannon
}
