import { watch } from 'node:fs'

export interface FolderWatchOptions {
  /** How long to wait for a burst of file events to settle before reloading, in ms. */
  readonly debounceMs: number
  /** Full re-read at this interval, in case a file event was missed (network file systems), in ms. */
  readonly rescanMs: number
  /** Told when the OS refuses the watch: the periodic re-read carries on. */
  readonly onWatchError: (error: Error) => void
}

export interface FolderWatch {
  /** Stops watching: no reload starts after this, no handle is left open. */
  close(): void
}

/**
 * Runs `reload` after any file event in `dir`, and every `rescanMs` in case an
 * event was missed. Whatever file name an event carries, the caller re-reads
 * what it watches: that covers an editor's write-then-rename and a Kubernetes
 * ConfigMap's symlink swap alike (docs/policies.md). One reload at a time;
 * events during a reload ask for one more after it.
 */
export function watchFolder(dir: string, reload: () => Promise<void>, options: FolderWatchOptions): FolderWatch {
  let reloading = false
  let again = false
  let debounce: NodeJS.Timeout | undefined

  async function run(): Promise<void> {
    if (reloading) {
      again = true
      return
    }
    reloading = true
    do {
      again = false
      await reload()
    } while (again)
    reloading = false
  }

  function schedule(): void {
    clearTimeout(debounce)
    debounce = setTimeout(() => void run(), options.debounceMs)
  }

  const watcher = watch(dir, { persistent: false }, schedule)
  // The watcher fails only when the OS refuses it (inotify limits): the periodic re-scan carries on, and
  // a listener must exist or the error would end the process.
  watcher.on('error', options.onWatchError)
  const rescan = setInterval(() => void run(), options.rescanMs)
  rescan.unref()
  return {
    close() {
      watcher.close()
      clearTimeout(debounce)
      clearInterval(rescan)
    },
  }
}
