// The shared suite against the native server: `ifmatch serve` on the local disk, and with
// nothing but a bucket (another `ifmatch serve`, through object_store's Azure backend).
import { suite } from "./suite.mjs";
import { startNative, startNativeOverBucket } from "./targets.mjs";

suite("native ifmatch serve", startNative);
suite("native ifmatch serve over a bucket", startNativeOverBucket);
