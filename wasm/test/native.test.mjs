// The shared suite against the native server (`ifmatch serve` on the local disk).
import { suite } from "./suite.mjs";
import { startNative } from "./targets.mjs";

suite("native ifmatch serve", startNative);
