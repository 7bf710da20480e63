"""Admission control: reject at arrival a request whose TTFT SLO cannot be met (engine-free)."""

from ppsched.admission.controller import (
    ADMISSION_MODES,
    AdmissionConfig,
    AdmissionController,
    build_admission,
)
from ppsched.admission.drain import DrainRateEstimator
from ppsched.admission.gate import AdmissionGate
from ppsched.admission.snapshot import AdmissionDecision, AdmissionSnapshot

__all__ = ["ADMISSION_MODES", "AdmissionConfig", "AdmissionController", "AdmissionDecision",
           "AdmissionGate", "AdmissionSnapshot", "DrainRateEstimator", "build_admission"]
