/// The version of lanchatd and lanchat (one number for both; the control API reports the daemon's).
public let lanchatVersion = "0.1.0"
